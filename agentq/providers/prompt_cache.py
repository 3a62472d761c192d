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

from typing import Any

MAX_BREAKPOINTS = 4
EPHEMERAL = {"type": "ephemeral"}


def with_breakpoints(body: dict[str, Any]) -> dict[str, Any]:
    """A copy of the messages body with cache breakpoints on its stable prefix.

    Only what gets a breakpoint is copied: the rest is shared with `body`, which is left
    as it was (its messages' blocks are each message's own, made once: `Message.memo`).
    """
    body = dict(body)
    marked = 0
    if body.get("tools"):
        *earlier, last = body["tools"]
        body["tools"] = [*earlier, {**last, "cache_control": EPHEMERAL}]
        marked += 1
    if isinstance(body.get("system"), str) and body["system"]:
        body["system"] = [{"type": "text", "text": body["system"], "cache_control": EPHEMERAL}]
        marked += 1
    messages = body["messages"] = list(body["messages"])
    for index in _history_marks(messages)[: MAX_BREAKPOINTS - marked]:
        messages[index] = _with_last_block_marked(messages[index])
    return body


def _history_marks(messages: list[dict[str, Any]]) -> list[int]:
    """The last message, then the user message before the last round, newest first."""
    if not messages:
        return []
    last = len(messages) - 1
    earlier = next((i for i in range(last - 1, -1, -1) if messages[i]["role"] == "user"), None)
    return [last] if earlier is None else [last, earlier]


def _with_last_block_marked(message: dict[str, Any]) -> dict[str, Any]:
    content = message["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    for index in range(len(blocks) - 1, -1, -1):
        if blocks[index].get("type") not in ("thinking", "redacted_thinking"):  # no cache_control
            blocks[index] = {**blocks[index], "cache_control": EPHEMERAL}
            break
    return {**message, "content": blocks}
