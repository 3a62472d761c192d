"""Request options the Anthropic emulator checks, each a documented Messages API rule.

- TOOL_CHOICE: `tool_choice` is {"type": auto|any|none} or {"type": "tool", "name"} naming one
  of `tools`, and may only be given with `tools`.
- OUTPUT_FORMAT: structured outputs take `output_config.format` =
  {"type": "json_schema", "schema": <object>}.
"""
from __future__ import annotations

from typing import Any

TOOL_CHOICE_WITHOUT_TOOLS = "tool_choice may only be specified while providing tools."


def tool_choice_problem(body: dict[str, Any]) -> str | None:
    """TOOL_CHOICE."""
    if "tool_choice" not in body:
        return None
    choice = body["tool_choice"]
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind not in ("auto", "any", "tool", "none"):
        return ("tool_choice: Input tag found using 'type' does not match any of the expected tags: "
                "'auto', 'any', 'tool', 'none'")
    if not body.get("tools"):
        return TOOL_CHOICE_WITHOUT_TOOLS
    names = {t.get("name") for t in body["tools"] if isinstance(t, dict)}
    if kind == "tool" and choice.get("name") not in names:
        return f"tool_choice.name: Tool '{choice.get('name')}' not found in provided tools"
    return None


def output_format_problem(body: dict[str, Any]) -> str | None:
    """OUTPUT_FORMAT."""
    config = body.get("output_config")
    if config is None:
        return None
    fmt = config.get("format") if isinstance(config, dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return "output_config.format.type: Input should be 'json_schema'"
    if not isinstance(fmt.get("schema"), dict):
        return "output_config.format.schema: Input should be a valid dictionary"
    return None


def options_problem(body: dict[str, Any]) -> str | None:
    return tool_choice_problem(body) or output_format_problem(body)
