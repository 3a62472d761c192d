"""Where to cut a log for a summary, and the token estimates that say when to.

docs/design.md §16.2: a cut by message count split a tool-heavy turn and orphaned its results.
Here the cut is only ever at a user_msg (inv. 2: every such cut is safe), and the tail
holds whole turns, never part of one: `min_keep_turns` of them while they fit.
"""
from __future__ import annotations

import json
import math
from collections.abc import Sequence

from agentq.core.events import Event, View
from agentq.core.keys import canonical_json
from agentq.core.parts import IMAGE_TOKENS, images_of
from agentq.core.render import output_text
from agentq.core.request import Message, Request

# What each wire adds around the texts counted below (a message's role and keys, a call's
# type and wrapper, a tool's wrapper), in tokens of four characters: the most any of the
# three wires (Chat Completions, Messages, Responses) adds, measured on their bodies
# (tests/runtime/test_token_estimate.py). Ids and JSON escapes are counted as they are.
MESSAGE_OVERHEAD_TOKENS = 16
CALL_OVERHEAD_TOKENS = 20
TOOL_OVERHEAD_TOKENS = 16
# Once a request: the system prompt's wrapper and Anthropic's four cache breakpoints.
REQUEST_OVERHEAD_TOKENS = 64


def estimate_tokens(text: str) -> int:
    """ceil(len(text) / 4): a provider-neutral estimate of a text's tokens."""
    return math.ceil(len(text) / 4)


def wire_tokens(text: str) -> int:
    """Tokens of `text` as a request carries it: a JSON string, its quotes and escapes
    counted (a newline is two characters there, a control character six)."""
    return math.ceil(len(json.dumps(text, ensure_ascii=False)) / 4)


def message_tokens(message: Message) -> int:
    """Estimated tokens of one message as sent: its text, images, reasoning items and calls,
    with what the wire wraps around each."""
    total = MESSAGE_OVERHEAD_TOKENS + wire_tokens(message.text) + IMAGE_TOKENS * images_of(message.parts)
    if message.tool_call_id is not None:
        total += wire_tokens(message.tool_call_id)
    total += sum(wire_tokens(canonical_json(item.item)) for item in message.reasoning)
    return total + sum(CALL_OVERHEAD_TOKENS + wire_tokens(c.id) + wire_tokens(c.name)
                       + wire_tokens(canonical_json(c.args)) for c in message.tool_calls)


def request_tokens(request: Request) -> int:
    """Estimated tokens of a whole request as sent: system, messages, calls and tool schemas.

    Conservative: at least what a provider counting four characters of the JSON body a
    token would count (images aside, at IMAGE_TOKENS each). A real tokenizer counts English
    at about four characters a token, code and other languages denser: leave 10-20% of a
    model's context window as margin when choosing `max_context_tokens`.
    """
    total = REQUEST_OVERHEAD_TOKENS + wire_tokens(request.system)
    total += sum(message.memo(message_tokens) for message in request.messages)
    for tool in request.tools:
        total += (TOOL_OVERHEAD_TOKENS + wire_tokens(tool.name) + wire_tokens(tool.description)
                  + wire_tokens(canonical_json(tool.parameters)))
    return total


def event_tokens(event: Event) -> int:
    """Estimated tokens one event adds to the rendered context (what `render` sends of it,
    counted as `message_tokens` counts it)."""
    content = event.content
    if event.type in ("user_msg", "assistant_msg"):
        reasoning = sum(wire_tokens(canonical_json(entry)) for entry in content.get("reasoning") or ())
        return (MESSAGE_OVERHEAD_TOKENS + wire_tokens(content.get("text", ""))
                + IMAGE_TOKENS * images_of(content.get("parts")) + reasoning)
    call_id = wire_tokens(content.get("tool_call_id") or "")
    if event.type == "tool_call":
        return (CALL_OVERHEAD_TOKENS + call_id + wire_tokens(content.get("name", ""))
                + wire_tokens(canonical_json(content.get("args", {}))))
    if event.type == "tool_result":
        return MESSAGE_OVERHEAD_TOKENS + call_id + wire_tokens(output_text(content.get("output")))
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


def compaction_cut(
    view: View, *, context_tokens: int, force: bool = False
) -> int | None:
    """The seq where the kept tail starts if this view should be compacted now, else None.

    Compaction is due when the rendered context passes the budget (or `force`, after a
    provider said "context too long"). The tail keeps whole turns, so the cut is always at
    a user_msg (docs/design.md §16.2) and the current turn is never summarized: at least
    `min_keep_turns` while they fit in half the budget (more while those fit), else fewer,
    down to the current turn alone. A forced cut keeps only the current turn.
    """
    policy = view.settings.compaction
    budget = policy.max_context_tokens
    if not force and (budget is None or context_tokens <= budget):
        return None
    if force or budget is None:
        return find_cut(view.events, min_keep_turns=1, keep_tokens=0)
    keep_tokens = budget // 2
    cut = find_cut(view.events, min_keep_turns=policy.min_keep_turns, keep_tokens=keep_tokens)
    if cut is None or _tokens_from(view.events, cut) > keep_tokens:
        cut = find_cut(view.events, min_keep_turns=1, keep_tokens=keep_tokens)
    return cut


def _tokens_from(events: Sequence[Event], seq: int) -> int:
    return sum(event_tokens(e) for e in events if e.seq >= seq)


def result_token_limit(view: View) -> int | None:
    policy = view.settings.compaction
    if policy.max_result_tokens is not None:
        return policy.max_result_tokens
    return None if policy.max_context_tokens is None else policy.max_context_tokens // 4
