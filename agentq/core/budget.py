"""The context of the next model call: compact first if a cut helps, else shorten it to fit.

"Context too long" must never fail a conversation. Compaction summarizes whole turns
before a cut; what no cut can reach (the current turn, the summary standing for the rest)
is shortened here, in the rendered context only, never in the log (inv. 1): tool results
first, then the summary, then the model's texts, then the person's. Every shortening is
recorded as an eviction, so "why did it forget X" has an answer (GET …/context, audit).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from agentq.core.compaction import compaction_cut, request_tokens, result_token_limit
from agentq.core.events import View
from agentq.core.render import render
from agentq.core.request import Message, Request, ToolSpec

EVICTED_NOTE = "\n[... {evicted} more characters of this {what} were left out of the context]"
# What is shortened, in order, until the request fits; each kind names what a message holds.
SHORTENING_ORDER = ("tool_result", "summary", "assistant_msg", "user_msg")
_WHAT = {"tool_result": "result", "summary": "summary", "assistant_msg": "answer",
         "user_msg": "message"}


@dataclass(frozen=True)
class Context:
    """The next model call's request, what was shortened in it, and a compaction due first.

    `rendered` is the request before any shortening, for a tighter fit after a provider
    refused `request` as too long.
    """

    request: Request
    evictions: tuple[dict, ...]
    cut: int | None
    rendered: Request


Renderer = Callable[[View, Sequence[ToolSpec]], Request]  # `render`, or one that gives the same


def plan_context(view: View, tools: Sequence[ToolSpec] = (),
                 renderer: Renderer = render) -> Context:
    """Render the view; if it passes the budget, compact (a cut) or shorten it to fit.

    The request's tokens are counted only under a budget: counting visits every message of
    the history, the largest part of a long conversation's step that is no round trip, and
    without a budget nothing is decided by it."""
    rendered = renderer(view, tools)
    request, evictions = fit(rendered, view)
    budget = view.settings.compaction.max_context_tokens
    if budget is None:
        return Context(request, evictions, None, rendered)
    tokens = request_tokens(request)
    cut = compaction_cut(view, context_tokens=tokens)
    if cut is None and tokens > budget:
        request, evictions = fit(rendered, view, budget=budget)
    return Context(request, evictions, cut, rendered)


def fit(request: Request, view: View, *, budget: int | None = None) -> tuple[Request, tuple[dict, ...]]:
    """`request` with tool results over the view's limit shortened, then anything, to `budget`.

    Careful: only texts are shortened; the system prompt, tool schemas and the calls'
    arguments stay whole, so a budget below them cannot be met (the request is then as
    small as it gets).
    """
    limit = result_token_limit(view)
    caps = {} if limit is None else {
        index: limit * 4 for index, m in enumerate(request.messages) if m.role == "tool"
    }
    summarized = view.summary is not None
    if budget is not None:
        for kind in SHORTENING_ORDER:
            if request_tokens(_shortened(request, caps, summarized)[0]) <= budget:
                break
            indices = [i for i, m in enumerate(request.messages) if _kind(i, m, summarized) == kind]
            caps = _tightest_fit(request, caps, indices, budget, summarized)
    return _shortened(request, caps, summarized)


def _kind(index: int, message: Message, summarized: bool) -> str:
    if message.role == "tool":
        return "tool_result"
    if index == 0 and summarized:
        return "summary"
    return "assistant_msg" if message.role == "assistant" else "user_msg"


def _tightest_fit(request: Request, caps: dict[int, int], indices: list[int], budget: int,
                  summarized: bool) -> dict[int, int]:
    """`caps` with one common cap on `indices`: the largest that fits the budget, else 0."""
    if not indices:
        return caps

    def with_cap(cap: int) -> dict[int, int]:
        return {**caps, **{i: min(caps.get(i, cap), cap) for i in indices}}

    low, high = 0, max(len(request.messages[i].text) for i in indices)
    while low < high:  # the largest cap whose request fits (sizes fall as the cap does)
        middle = (low + high + 1) // 2
        fits = request_tokens(_shortened(request, with_cap(middle), summarized)[0]) <= budget
        low, high = (middle, high) if fits else (low, middle - 1)
    return with_cap(low)


def _shortened(request: Request, caps: dict[int, int],
               summarized: bool) -> tuple[Request, tuple[dict, ...]]:
    messages, evictions = list(request.messages), []
    for index, keep_chars in sorted(caps.items()):
        message = messages[index]
        kind = _kind(index, message, summarized)
        text = shorten(message.text, keep_chars, _WHAT[kind])
        if text is not message.text:
            messages[index] = replace(message, text=text)
            evictions.append({"kind": kind, "tool_call_id": message.tool_call_id,
                              "chars": len(message.text), "kept_chars": keep_chars})
    if not evictions:
        return request, ()
    return replace(request, messages=tuple(messages)), tuple(evictions)


def shorten(text: str, keep_chars: int, what: str = "result") -> str:
    """The first `keep_chars` of `text` and a note of what was left out; `text` itself if
    that would not be shorter."""
    if len(text) <= keep_chars:
        return text
    shortened = text[:keep_chars] + EVICTED_NOTE.format(evicted=len(text) - keep_chars, what=what)
    return shortened if len(shortened) < len(text) else text
