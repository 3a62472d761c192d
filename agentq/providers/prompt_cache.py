"""Anthropic prompt caching: cache_control breakpoints placed on every messages request.

The cache prefix runs tools → system → messages, and a breakpoint caches everything up
to its block. agentq's history only grows (the log is append-only, and a summary changes
the prefix once per cut), so the stable prefix is: the tools, the system prompt, and
the whole history up to the request's last block; the next round reads it back and
writes only what was added. The previous user message keeps a breakpoint too, so the
prefix the last round wrote is found even when more than 20 blocks were added since
(the API looks back 20 blocks from a breakpoint). At most 4, as the API allows.
"""
from __future__ import annotations

import copy
from typing import Any

MAX_BREAKPOINTS = 4
EPHEMERAL = {"type": "ephemeral"}


def with_breakpoints(body: dict[str, Any]) -> dict[str, Any]:
    """A copy of the messages body with cache breakpoints on its stable prefix."""
    body = copy.deepcopy(body)
    marked = 0
    if body.get("tools"):
        body["tools"][-1]["cache_control"] = EPHEMERAL
        marked += 1
    if isinstance(body.get("system"), str) and body["system"]:
        body["system"] = [{"type": "text", "text": body["system"], "cache_control": EPHEMERAL}]
        marked += 1
    for message in _history_marks(body["messages"])[: MAX_BREAKPOINTS - marked]:
        _mark_last_block(message)
    return body


def _history_marks(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last message, then the user message before the last round, newest first."""
    if not messages:
        return []
    marks = [messages[-1]]
    earlier = [m for m in messages[:-1] if m["role"] == "user"]
    if earlier:
        marks.append(earlier[-1])
    return marks


def _mark_last_block(message: dict[str, Any]) -> None:
    content = message["content"]
    if isinstance(content, str):
        message["content"] = content = [{"type": "text", "text": content}]
    for block in reversed(content):
        if block.get("type") not in ("thinking", "redacted_thinking"):  # cannot carry cache_control
            block["cache_control"] = EPHEMERAL
            return
