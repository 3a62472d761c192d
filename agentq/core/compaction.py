"""Where to cut a log for a summary, and the token estimates that say when to.

Seed 001: a cut by message count split a tool-heavy turn and orphaned its results.
Here the cut is only ever at a user_msg (inv. 2: every such cut is safe), and
`min_keep_turns` is a minimum: the tail holds whole turns, never part of one.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from agentq.core.events import Event
from agentq.core.keys import canonical_json
from agentq.core.messages import Request


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
    """Estimated tokens of one event: its content as canonical JSON."""
    return estimate_tokens(canonical_json(event.content))


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
