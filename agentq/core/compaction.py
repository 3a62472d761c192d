"""Where to cut a log for a summary, and the token estimates that say when to.

Seed 001: a cut by message count split a tool-heavy turn and orphaned its results.
Here the cut is only ever at a user_msg (inv. 2: every such cut is safe), and
`min_keep_turns` is a minimum: the tail holds whole turns, never part of one.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from agentq.core.events import Event, View
from agentq.core.keys import canonical_json
from agentq.core.render import output_text, render
from agentq.core.request import Message, Request


def estimate_tokens(text: str) -> int:
    """ceil(len(text) / 4): a provider-neutral estimate, close enough to budget by."""
    return math.ceil(len(text) / 4)


def request_tokens(request: Request) -> int:
    """Estimated tokens of a whole request: system, messages, calls and tool schemas."""
    total = estimate_tokens(request.system)
    for message in request.messages:
        total += estimate_tokens(message.text)
        total += sum(estimate_tokens(c.name + canonical_json(c.args)) for c in message.tool_calls)
    for tool in request.tools:
        total += estimate_tokens(tool.name + tool.description + canonical_json(tool.parameters))
    return total


def event_tokens(event: Event) -> int:
    """Estimated tokens one event adds to the rendered context (what `render` sends of it)."""
    content = event.content
    if event.type in ("user_msg", "assistant_msg"):
        return estimate_tokens(content.get("text", ""))
    if event.type == "tool_call":
        return estimate_tokens(content.get("name", "") + canonical_json(content.get("args", {})))
    if event.type == "tool_result":
        return estimate_tokens(output_text(content.get("output")))
    return 0  # suspension, resolution, error: not rendered


def find_cut(
    events: Sequence[Event], *, min_keep_turns: int, keep_tokens: int | None = None
) -> int | None:
    """The seq of the user_msg where the kept tail starts, or None if no cut is safe.

    At least `min_keep_turns` whole turns are kept; with `keep_tokens`, earlier whole
    turns are kept too while the tail stays within it. Something is always left to
    summarize: a cut at the first event is no cut.
    """
    if min_keep_turns < 1:
        raise ValueError("min_keep_turns must be at least 1: the current turn is never summarized")
    starts = [i for i, e in enumerate(events) if e.type == "user_msg" and i > 0]  # inv. 2
    if len(starts) < min_keep_turns:
        return None
    chosen = len(starts) - min_keep_turns
    if keep_tokens is not None:
        tail = sum(event_tokens(e) for e in events[starts[chosen]:])
        while chosen > 0:
            earlier = sum(event_tokens(e) for e in events[starts[chosen - 1]:starts[chosen]])
            if tail + earlier > keep_tokens:
                break
            tail += earlier
            chosen -= 1
    return events[starts[chosen]].seq


DEFAULT_SUMMARY_PROMPT = (
    "You write the running summary of a conversation between a user and an assistant "
    "that uses tools. Keep every fact, decision, open question and tool outcome that a "
    "later answer may need; drop pleasantries. Answer with the summary only."
)
SUMMARY_REQUEST_TEXT = "Write the updated summary of the conversation above."
EVICTED_NOTE = "\n[... {evicted} more characters of this result were left out of the context]"


def compaction_cut(
    view: View, *, context_tokens: int, force: bool = False
) -> int | None:
    """The seq where the kept tail starts if this view should be compacted now, else None.

    Compaction is due when the rendered context passes the budget (or `force`, after a
    provider said "context too long"). The tail keeps whole turns (at least
    `min_keep_turns`, more while they fit in half the budget), so the cut is always at
    a user_msg (seed 001) and the current turn is never summarized.
    """
    policy = view.settings.compaction
    budget = policy.max_context_tokens
    if not force and (budget is None or context_tokens <= budget):
        return None
    keep_tokens = None if budget is None else budget // 2
    return find_cut(view.events, min_keep_turns=policy.min_keep_turns, keep_tokens=keep_tokens)


def summary_request(view: View, to_seq: int) -> Request:
    """What the summarizer is asked: the previous summary and the events up to `to_seq`."""
    head = replace(view, events=tuple(e for e in view.events if e.seq <= to_seq))
    rendered = render(head)
    policy = view.settings.compaction
    messages = (*rendered.messages, Message("user", SUMMARY_REQUEST_TEXT))
    return Request(
        system=policy.prompt or DEFAULT_SUMMARY_PROMPT,
        messages=_alternating(messages),
        model=policy.model or view.settings.model,
    )


def _alternating(messages: Sequence[Message]) -> tuple[Message, ...]:
    """Fold the closing request into a trailing user message, so roles still alternate."""
    if len(messages) >= 2 and messages[-2].role == "user":
        merged = Message("user", messages[-2].text + "\n\n" + messages[-1].text)
        return (*messages[:-2], merged)
    return tuple(messages)


def result_token_limit(view: View) -> int | None:
    policy = view.settings.compaction
    if policy.max_result_tokens is not None:
        return policy.max_result_tokens
    return None if policy.max_context_tokens is None else policy.max_context_tokens // 4


def evict(request: Request, *, max_result_tokens: int | None) -> tuple[Request, tuple[dict, ...]]:
    """Shorten oversized tool results in the rendered context; the log keeps them whole.

    Returns the request and one eviction record per shortened result, so "why did it
    forget X" has an answer (GET …/context, model_calls).
    """
    if max_result_tokens is None:
        return request, ()
    keep_chars = max_result_tokens * 4
    messages, evictions = [], []
    for message in request.messages:
        if message.role == "tool" and estimate_tokens(message.text) > max_result_tokens:
            evicted = len(message.text) - keep_chars
            evictions.append({"tool_call_id": message.tool_call_id,
                              "chars": len(message.text), "kept_chars": keep_chars})
            shortened = message.text[:keep_chars] + EVICTED_NOTE.format(evicted=evicted)
            message = replace(message, text=shortened)
        messages.append(message)
    return replace(request, messages=tuple(messages)), tuple(evictions)
