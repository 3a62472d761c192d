"""Request options the OpenAI chat completions emulator checks, each a documented API rule.

- REASONING_MAX_TOKENS: reasoning models (o-series, gpt-5*) refuse `max_tokens`; they take
  `max_completion_tokens` ("Unsupported parameter").
- REASONING_SAMPLING: reasoning models support only the default `temperature` / `top_p` (1).
- REASONING_EFFORT: `reasoning_effort` is one of minimal/low/medium/high, and only
  reasoning models accept it.
- TOOL_CHOICE: `tool_choice` is none/auto/required or a named function among `tools`, and is
  only allowed when `tools` are specified.
- RESPONSE_FORMAT: a `json_schema` response format needs a name matching ^[a-zA-Z0-9_-]{1,64}$
  and a schema object.
"""
from __future__ import annotations

import re
from typing import Any

Problem = tuple[str, str | None, str | None]  # message, param, code
REASONING_MODELS = re.compile(r"^(o[1-9]|gpt-5)")
_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _unsupported(param: str) -> Problem:
    hint = " Use 'max_completion_tokens' instead." if param == "max_tokens" else ""
    return (f"Unsupported parameter: '{param}' is not supported with this model.{hint}", param,
            "unsupported_parameter")


def reasoning_problem(body: dict[str, Any]) -> Problem | None:
    """REASONING_MAX_TOKENS, REASONING_SAMPLING, REASONING_EFFORT."""
    reasoning = bool(REASONING_MODELS.match(body["model"]))
    effort = body.get("reasoning_effort")
    if effort is not None and not reasoning:
        return _unsupported("reasoning_effort")
    if effort is not None and effort not in ("minimal", "low", "medium", "high"):
        return (f"Invalid value: '{effort}'. Supported values are: 'minimal', 'low', 'medium', and "
                "'high'.", "reasoning_effort", "invalid_value")
    if not reasoning:
        return None
    if "max_tokens" in body:
        return _unsupported("max_tokens")
    for name in ("temperature", "top_p"):
        if name in body and body[name] != 1:
            return (f"Unsupported value: '{name}' does not support {body[name]} with this model. Only "
                    "the default (1) value is supported.", name, "unsupported_value")
    return None


def _tool_names(body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools") or () if isinstance(t, dict)
            and isinstance(t.get("function"), dict)}


def tool_choice_problem(body: dict[str, Any]) -> Problem | None:
    """TOOL_CHOICE."""
    if "tool_choice" not in body:
        return None
    choice = body["tool_choice"]
    if not body.get("tools"):
        return ("Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are "
                "specified.", "tool_choice", None)
    if choice in ("none", "auto", "required"):
        return None
    function = choice.get("function") if isinstance(choice, dict) else None
    if not isinstance(function, dict) or choice.get("type") != "function":
        return ("Invalid value for 'tool_choice': expected 'none', 'auto', 'required' or a named "
                "function.", "tool_choice", "invalid_value")
    if function.get("name") not in _tool_names(body):
        return (f"Invalid value for 'tool_choice': function '{function.get('name')}' not found in "
                "'tools'.", "tool_choice", "invalid_value")
    return None


def response_format_problem(body: dict[str, Any]) -> Problem | None:
    """RESPONSE_FORMAT."""
    fmt = body.get("response_format")
    if fmt is None or (isinstance(fmt, dict) and fmt.get("type") in ("text", "json_object")):
        return None
    spec = fmt.get("json_schema") if isinstance(fmt, dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema" or not isinstance(spec, dict):
        return ("Invalid value for 'response_format': expected text, json_object or json_schema.",
                "response_format", "invalid_value")
    if not _NAME.match(str(spec.get("name"))):
        return ("Invalid 'response_format.json_schema.name': string does not match pattern.",
                "response_format.json_schema.name", "invalid_value")
    if not isinstance(spec.get("schema"), dict):
        return ("Invalid type for 'response_format.json_schema.schema': expected an object.",
                "response_format.json_schema.schema", "invalid_type")
    return None


def options_problem(body: dict[str, Any]) -> Problem | None:
    return reasoning_problem(body) or tool_choice_problem(body) or response_format_problem(body)
