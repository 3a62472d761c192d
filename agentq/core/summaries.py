"""What a compact step asks the model: the span to summarize as a transcript, in pieces.

The span is written out as plain text, tool calls and results included, in one user
message with no `tools`: a summarizer must not call tools, and a request holding
`tool_use`/`tool_result` blocks without a `tools` definition is refused by Anthropic.
Plain text can also be cut anywhere, so a span too long for one request is summarized
in pieces, each folded into the running summary, every request within the budget.
"""
from __future__ import annotations

import json
import math
from dataclasses import replace

from agentq.core.budget import fit, shorten
from agentq.core.compaction import (
    MESSAGE_OVERHEAD_TOKENS,
    REQUEST_OVERHEAD_TOKENS,
    request_tokens,
    wire_tokens,
)
from agentq.core.events import View
from agentq.core.keys import canonical_json
from agentq.core.parts import images_of
from agentq.core.render import render
from agentq.core.request import Message, Request

DEFAULT_SUMMARY_PROMPT = (
    "You write the running summary of a conversation between a user and an assistant "
    "that uses tools. Keep every fact, decision, open question and tool outcome that a "
    "later answer may need; drop pleasantries. Answer with the summary only."
)
SUMMARY_SO_FAR = "The summary so far:\n"
TRANSCRIPT_HEAD = "The conversation to add to it:\n"
SUMMARY_REQUEST_TEXT = "Write the updated summary of the conversation above."
# A piece is never smaller than this, so a budget too small for the prompt still ends.
MIN_PIECE_CHARS = 200


def transcript(view: View, to_seq: int) -> str:
    """The events after the view's summary up to `to_seq`, one line per message.

    Tool results are shortened as in the model's own context (`max_result_tokens`).
    """
    span = replace(view, summary=None, events=tuple(e for e in view.events if e.seq <= to_seq))
    request, _ = fit(render(span), span)
    names = {call.id: call.name for m in request.messages for call in m.tool_calls}
    return "\n".join(_line(message, names) for message in request.messages)


def _line(message: Message, names: dict[str, str]) -> str:
    if message.role == "user":
        images = images_of(message.parts)
        return "User: " + message.text + (f" [{images} image(s)]" if images else "")
    if message.role == "tool":
        failed = " (failed)" if message.is_error else ""
        name = names.get(message.tool_call_id or "", "a tool")
        return f"Result of {name} [{message.tool_call_id}]{failed}: {message.text}"
    lines = [f"Assistant: {message.text}"] if message.text.strip() else []
    lines += [f"Assistant called {c.name}({canonical_json(c.args)}) [{c.id}]"
              for c in message.tool_calls]
    return "\n".join(lines)


def summary_request(
    view: View, summary: str, text: str, start: int, *, budget: int | None
) -> tuple[Request, int]:
    """The request folding `text[start:end]` into `summary`, and `end`.

    The piece is as long as `budget` allows (all of it without one), ending at a line
    break where one is near; the summary so far is shown up to a quarter of the budget.
    """
    policy = view.settings.compaction
    system = policy.prompt or DEFAULT_SUMMARY_PROMPT
    shown = summary if budget is None else shorten(summary, budget, "summary")
    head = (SUMMARY_SO_FAR + shown + "\n\n" if summary.strip() else "") + TRANSCRIPT_HEAD
    tail = "\n\n" + SUMMARY_REQUEST_TEXT
    if budget is None:
        end = len(text)
    else:  # the piece gets what the request without it leaves, in characters as sent
        framed = request_tokens(Request(system=system, messages=(Message("user", head + tail),)))
        room = _fitting(text, start, max((budget - framed) * 4, MIN_PIECE_CHARS))
        end = _piece_end(text, start, room)
    message = Message("user", head + text[start:end] + tail)
    return Request(system=system, messages=(message,), model=policy.model or view.settings.model or ""), end


def _sent_chars(text: str) -> int:
    """Characters of `text` inside a JSON string: escapes counted, quotes not."""
    return len(json.dumps(text, ensure_ascii=False)) - 2


def _fitting(text: str, start: int, room: int) -> int:
    """How many characters from `start` take at most `room` characters as sent."""
    low, high = 0, min(len(text) - start, room)
    if _sent_chars(text[start:start + high]) <= room:
        return high
    while low < high:  # the longest piece that fits (sent sizes grow with the piece)
        middle = (low + high + 1) // 2
        low, high = (middle, high) if _sent_chars(text[start:start + middle]) <= room else (low, middle - 1)
    return max(low, 1)


def _piece_end(text: str, start: int, room: int) -> int:
    """Where a piece of at most `room` characters from `start` ends: a line break if one
    is in its second half."""
    if len(text) - start <= room:
        return len(text)
    line_end = text.rfind("\n", start + room // 2, start + room)
    return line_end + 1 if line_end >= 0 else start + room


def smallest_summary_budget(view: View) -> int:
    """The smallest budget whose summary requests stay within it (with the default prompt,
    about 325 tokens): below it, pieces of MIN_PIECE_CHARS pass the budget."""
    policy = view.settings.compaction
    system = (REQUEST_OVERHEAD_TOKENS + MESSAGE_OVERHEAD_TOKENS
              + wire_tokens(policy.prompt or DEFAULT_SUMMARY_PROMPT))
    framing = len(json.dumps(SUMMARY_SO_FAR + "\n\n" + TRANSCRIPT_HEAD + "\n\n" + SUMMARY_REQUEST_TEXT))
    note = 100  # the note of a shortened summary, with room to spare
    # room = (budget - system) * 4 - framing - (budget + note) - 4 (rounding) >= MIN_PIECE_CHARS,
    # for a summary of plain text (its newlines count twice as sent)
    return math.ceil((4 * system + framing + note + 4 + MIN_PIECE_CHARS) / 3)
