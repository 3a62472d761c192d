"""Extended thinking in the Anthropic emulator: the blocks it issues and the rules it enforces.

Each rule mirrors the documented behaviour of the Messages API ("Building with extended
thinking", "Extended thinking with tool use"):

- THINKING_BUDGET: `thinking.budget_tokens` is at least 1024 and below `max_tokens`.
- THINKING_TEMPERATURE: thinking is not compatible with `temperature` changes (only 1).
- THINKING_FORCED_TOOL: with thinking, `tool_choice` may only be `auto` or `none`.
- THINKING_FIRST: with thinking on, the assistant message of the tool-use round being
  answered (its tool_result is in the last user message) must start with a `thinking` or
  `redacted_thinking` block, passed back unmodified.
- THINKING_SIGNATURE: a `thinking` block's signature must be the one the API issued for
  that very text; a `redacted_thinking` block's data must be what the API issued.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

_SECRET = b"emulator thinking key"

THINKING_BUDGET = "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
BUDGET_BELOW_MAX = "`max_tokens` must be greater than `thinking.budget_tokens`"
THINKING_TEMPERATURE = "`temperature` may only be set to 1 when thinking is enabled"
THINKING_FORCED_TOOL = "Thinking may not be enabled when tool_choice forces tool use."
THINKING_FIRST = ("Expected `thinking` or `redacted_thinking`, but found `{found}`. When `thinking` "
                  "is enabled, a final `assistant` message must start with a thinking block "
                  "(preceeding the lastmost set of `tool_use` and `tool_result` blocks).")
THINKING_SIGNATURE = "Invalid `signature` in `thinking` block"
REDACTED_DATA = "Invalid `data` in `redacted_thinking` block"


def signature(thinking: str) -> str:
    """The signature the emulator issues for a thinking text (and checks when it comes back)."""
    mac = hmac.new(_SECRET, thinking.encode(), hashlib.sha256).digest()
    return base64.b64encode(mac).decode()


def redacted_data(seed: str) -> str:
    """An opaque, verifiable `redacted_thinking` payload."""
    body = base64.b64encode(seed.encode()).decode()
    return body + "." + signature("redacted:" + body)


def _redacted_ok(data: Any) -> bool:
    if not isinstance(data, str) or "." not in data:
        return False
    body, mac = data.rsplit(".", 1)
    return hmac.compare_digest(mac, signature("redacted:" + body))


def enabled(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") == "enabled"


def settings_problem(body: dict[str, Any]) -> str | None:
    """THINKING_BUDGET, THINKING_TEMPERATURE, THINKING_FORCED_TOOL."""
    if not enabled(body):
        return None
    budget = body["thinking"].get("budget_tokens")
    if not isinstance(budget, int) or budget < 1024:
        return THINKING_BUDGET
    if budget >= body["max_tokens"]:
        return BUDGET_BELOW_MAX
    if "temperature" in body and body["temperature"] != 1:
        return THINKING_TEMPERATURE
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        return THINKING_FORCED_TOOL
    return None


def blocks_problem(messages: list[dict[str, Any]]) -> str | None:
    """THINKING_SIGNATURE, on every thinking block sent, thinking on or off."""
    for index, message in enumerate(messages):
        content = message["content"] if isinstance(message["content"], list) else []
        for number, block in enumerate(content):
            where = f"messages.{index}.content.{number}"
            if block.get("type") == "thinking":
                sent = block.get("signature")
                text = block.get("thinking")
                if not isinstance(text, str) or not isinstance(sent, str) or not hmac.compare_digest(
                        sent, signature(text)):
                    return f"{where}: {THINKING_SIGNATURE}"
            if block.get("type") == "redacted_thinking" and not _redacted_ok(block.get("data")):
                return f"{where}: {REDACTED_DATA}"
    return None


def _only_results(message: dict[str, Any]) -> bool:
    content = message["content"] if isinstance(message["content"], list) else []
    return message["role"] == "user" and bool(content) and all(
        b.get("type") == "tool_result" for b in content)


def tool_round_problem(body: dict[str, Any]) -> str | None:
    """THINKING_FIRST. Without interleaved thinking the model thinks once, at the start of
    its turn: the turn's first assistant message (after the last user message that is not
    only tool results) is the one that must open with its thinking block."""
    messages = body["messages"]
    if not enabled(body) or not _only_results(messages[-1]):
        return None
    index = len(messages) - 1
    while index > 0 and (messages[index]["role"] == "assistant" or _only_results(messages[index])):
        index -= 1
    first_reply = index + 1
    if first_reply >= len(messages) or messages[first_reply]["role"] != "assistant":
        return None
    content = messages[first_reply]["content"]
    first = content[0] if isinstance(content, list) else {"type": "text"}
    if first.get("type") in ("thinking", "redacted_thinking"):
        return None
    return (f"messages.{first_reply}.content.0.type: "
            + THINKING_FIRST.format(found=first.get("type")))
