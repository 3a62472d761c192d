"""What the OpenAI Responses API refuses: each documented rule by name, one error at a time.

Written from the API reference and the reasoning and function-calling guides,
independently of agentq's renderer. `check` returns the first `Problem` (rule name,
OpenAI's message, param, code) or None. The rules that need to remember earlier answers
(reasoning items and the calls they preceded) read a `Memory` the emulator keeps.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tests.support.emulators.script import estimate_tokens

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# Models that reason: they return reasoning items and take no temperature or top_p.
REASONING_MODEL = re.compile(r"^(o\d|gpt-5|emu-reasoner)")
PARAMETERS = frozenset({
    "background", "conversation", "include", "input", "instructions", "max_output_tokens",
    "max_tool_calls", "metadata", "model", "parallel_tool_calls", "previous_response_id", "prompt",
    "prompt_cache_key", "prompt_cache_retention", "reasoning", "safety_identifier", "service_tier",
    "store", "stream", "stream_options", "temperature", "text", "tool_choice", "tools",
    "top_logprobs", "top_p", "truncation", "user",
})
INCLUDABLE = frozenset({
    "reasoning.encrypted_content", "message.output_text.logprobs", "file_search_call.results",
    "web_search_call.action.sources", "code_interpreter_call.outputs",
    "computer_call_output.output.image_url", "message.input_image.image_url",
})
ENCRYPTED = "reasoning.encrypted_content"
DATA_URL = re.compile(r"^data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/]+=*$")
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
SUMMARIES = ("auto", "concise", "detailed")
# Fields each input item type may carry (anything else is an unknown parameter).
ITEM_FIELDS = {
    "message": {"type", "role", "content", "id", "status"},
    "function_call": {"type", "call_id", "name", "arguments", "id", "status"},
    "function_call_output": {"type", "call_id", "output", "id", "status"},
    "reasoning": {"type", "id", "summary", "encrypted_content", "content", "status"},
}
PART_TYPES = {"user": ("input_text", "input_image", "input_file"), "system": ("input_text",),
              "developer": ("input_text",), "assistant": ("output_text", "refusal")}


class Problem(NamedTuple):
    rule: str
    message: str
    param: str | None = None
    code: str | None = None


@dataclass
class Memory:
    """What the emulator answered before: reasoning items it issued, and what followed each."""

    encrypted: dict[str, str] = field(default_factory=dict)  # reasoning id -> encrypted_content
    follower: dict[str, str] = field(default_factory=dict)  # reasoning id -> next output item key
    reasoning_of_call: dict[str, str] = field(default_factory=dict)  # call_id -> reasoning id
    stored: set[str] = field(default_factory=set)  # reasoning ids kept (store=true)


def _unknown(param: str) -> Problem:
    return Problem("unknown_parameter", f"Unknown parameter: '{param}'.", param, "unknown_parameter")


def _missing(param: str) -> Problem:
    return Problem("required_parameter", f"Missing required parameter: '{param}'.", param,
                   "missing_required_parameter")


def _invalid(rule: str, param: str, message: str) -> Problem:
    return Problem(rule, message, param, "invalid_value")


def _parameters_problem(body: dict[str, Any]) -> Problem | None:
    for name in body:
        if name not in PARAMETERS:
            return _unknown(name)
    if not isinstance(body.get("model"), str) or not body["model"]:
        return _missing("model")
    if "input" not in body:
        return _missing("input")
    if "stream_options" in body and body.get("stream") is not True:
        return _invalid("stream_options_need_stream", "stream_options",
                        "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
    if "instructions" in body and not isinstance(body["instructions"], (str, type(None))):
        return _invalid("instructions_text", "instructions", "Invalid type for 'instructions': expected a string.")
    tokens = body.get("max_output_tokens")
    if tokens is not None and (not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 16):
        return _invalid("max_output_tokens_minimum", "max_output_tokens",
                        f"Invalid 'max_output_tokens': integer below minimum value. Expected a value "
                        f">= 16, but got {tokens} instead.")
    for name in body.get("include") or ():
        if name not in INCLUDABLE:
            return _invalid("include_values", "include", f"Invalid value: '{name}'. Supported values "
                            "are: " + ", ".join(f"'{n}'" for n in sorted(INCLUDABLE)) + ".")
    if body.get("include") and ENCRYPTED in body["include"] and not REASONING_MODEL.match(body["model"]):
        return Problem("encrypted_content_needs_a_reasoning_model",
                       "Encrypted content is not supported with this model.", "include", "unsupported_parameter")
    return _model_problem(body)


def _model_problem(body: dict[str, Any]) -> Problem | None:
    reasons = bool(REASONING_MODEL.match(body["model"]))
    for name in ("temperature", "top_p"):
        if reasons and body.get(name) is not None:
            return Problem("no_sampling_for_reasoning_models",
                           f"Unsupported parameter: '{name}' is not supported with this model.",
                           name, "unsupported_parameter")
    reasoning = body.get("reasoning")
    if reasoning is None:
        return None
    if not reasons:
        return Problem("reasoning_needs_a_reasoning_model", "Unsupported parameter: "
                       "'reasoning.effort' is not supported with this model.", "reasoning.effort",
                       "unsupported_parameter")
    if not isinstance(reasoning, dict):
        return _invalid("reasoning_shape", "reasoning", "Invalid type for 'reasoning': expected an object.")
    for name, allowed in (("effort", EFFORTS), ("summary", SUMMARIES)):
        if name in reasoning and reasoning[name] is not None and reasoning[name] not in allowed:
            return _invalid("reasoning_shape", f"reasoning.{name}", f"Invalid value: "
                            f"'{reasoning[name]}'. Supported values are: " + ", ".join(allowed) + ".")
    extra = set(reasoning) - {"effort", "summary", "generate_summary"}
    return _unknown(f"reasoning.{min(extra)}") if extra else None


def _content_problem(where: str, role: str, content: Any) -> Problem | None:
    if isinstance(content, str):
        return None
    if not isinstance(content, list) or not content:
        return Problem("message_content", f"Invalid type for '{where}.content': expected one of a "
                       "string or array of input items.", f"{where}.content", "invalid_type")
    for number, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in PART_TYPES[role]:
            return _invalid("content_part_for_role", f"{where}.content[{number}].type",
                            f"Invalid value: '{kind}'. Supported values are: "
                            + ", ".join(f"'{k}'" for k in PART_TYPES[role]) + ".")
        if kind in ("input_text", "output_text") and not isinstance(part.get("text"), str):
            return _missing(f"{where}.content[{number}].text")
        if kind == "input_image":
            problem = _image_problem(f"{where}.content[{number}]", part)
            if problem:
                return problem
    return None


def _image_problem(where: str, part: dict[str, Any]) -> Problem | None:
    """An input_image: an https URL or a base64 data URL of PNG, JPEG, WEBP or GIF, and a detail."""
    for name in part:
        if name not in ("type", "image_url", "file_id", "detail"):
            return _unknown(f"{where}.{name}")
    url = part.get("image_url")  # flat, unlike chat completions' {"image_url": {"url"}}
    if not isinstance(url, str) or not (url.startswith("https://") or DATA_URL.match(url)):
        return _invalid("image_url_or_data_url", f"{where}.image_url", "Invalid image URL: expected an "
                        "https URL or a base64 data URL of a supported image type.")
    if part.get("detail") not in ("low", "high", "auto"):
        return _invalid("image_detail", f"{where}.detail", f"Invalid value: '{part.get('detail')}'. "
                        "Supported values are: 'low', 'high', and 'auto'.")
    return None


def _item_problem(where: str, item: Any) -> Problem | None:
    if not isinstance(item, dict):
        return Problem("item_shape", f"Invalid type for '{where}': expected an object.", where, "invalid_type")
    kind = item.get("type", "message" if "role" in item else None)
    if kind not in ITEM_FIELDS:
        return _invalid("item_type", f"{where}.type", f"Invalid value: '{kind}'. Supported values are: "
                        + ", ".join(f"'{k}'" for k in ITEM_FIELDS) + ".")
    for name in item:
        if name not in ITEM_FIELDS[kind]:
            return _unknown(f"{where}.{name}")
    if kind == "message":
        if item.get("role") not in PART_TYPES:
            return _invalid("message_role", f"{where}.role", f"Invalid value: '{item.get('role')}'. "
                            "Supported values are: 'user', 'assistant', 'system', and 'developer'.")
        if "content" not in item:
            return _missing(f"{where}.content")
        return _content_problem(where, item["role"], item["content"])
    if kind in ("function_call", "function_call_output") and not isinstance(item.get("call_id"), str):
        return _missing(f"{where}.call_id")
    if kind == "function_call":
        if not isinstance(item.get("name"), str):
            return _missing(f"{where}.name")
        if not isinstance(item.get("arguments"), str):
            return Problem("arguments_are_text", f"Invalid type for '{where}.arguments': expected a "
                           "string.", f"{where}.arguments", "invalid_type")
    if kind == "function_call_output" and not isinstance(item.get("output"), (str, list)):
        return _missing(f"{where}.output")
    if kind == "reasoning":
        if not isinstance(item.get("id"), str):
            return _missing(f"{where}.id")
        if not isinstance(item.get("summary"), list):
            return _missing(f"{where}.summary")
    return None


def _calls_problem(items: list[dict[str, Any]]) -> Problem | None:
    """Each function_call_output answers a function_call earlier in the input; each call is answered."""
    calls: list[str] = []
    answered: set[str] = set()
    for index, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "function_call":
            if item["call_id"] in calls:
                return _invalid("call_ids_unique", f"input[{index}].call_id",
                                f"Duplicate value for 'call_id' of {item['call_id']} in 'input'.")
            calls.append(item["call_id"])
        elif kind == "function_call_output":
            if item["call_id"] not in calls:
                return Problem("output_needs_its_call", "No tool call found for function call output "
                               f"with call_id {item['call_id']}.", "input", None)
            if item["call_id"] in answered:
                return _invalid("one_output_per_call", f"input[{index}].call_id",
                                f"Duplicate function call output for call_id {item['call_id']}.")
            answered.add(item["call_id"])
    for call_id in calls:
        if call_id not in answered:
            return Problem("call_needs_its_output", f"No tool output found for function call {call_id}.",
                           "input", None)
    return None


def _item_key(item: dict[str, Any]) -> str:
    """How a later request names an output item: a call by its call_id, a message by its role."""
    kind = item.get("type", "message")
    return f"call:{item['call_id']}" if kind == "function_call" else kind


def _reasoning_problem(items: list[dict[str, Any]], body: dict[str, Any], memory: Memory) -> Problem | None:
    """Reasoning items come back whole (stateless: with their encrypted_content), before what they preceded."""
    stateless = body.get("store") is False
    seen: set[str] = set()
    for index, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "reasoning":
            rid = item["id"]
            secret = item.get("encrypted_content")
            if secret is None and (stateless or rid not in memory.stored):
                return Problem("reasoning_sent_back_whole", f"Item with id '{rid}' not found. Items are "
                               "not persisted when `store` is set to false. Try again with `store` set "
                               "to true, or remove this item from your input.", "input", None)
            if secret is not None and memory.encrypted.get(rid) != secret:
                return Problem("encrypted_content_verified", f"The encrypted content for item {rid} "
                               "could not be verified.", "input", "invalid_encrypted_content")
            later = {_item_key(i) for i in items[index + 1:]}
            if rid in memory.follower and memory.follower[rid] not in later:
                return Problem("reasoning_needs_its_following_item", f"Item '{rid}' of type 'reasoning' "
                               "was provided without its required following item.", "input", None)
            seen.add(rid)
        elif kind == "function_call":
            needed = memory.reasoning_of_call.get(item["call_id"])
            if needed is not None and needed not in seen:
                return Problem("call_needs_its_reasoning", f"Item '{item['call_id']}' of type "
                               f"'function_call' was provided without its required 'reasoning' item: "
                               f"'{needed}'.", "input", None)
    return None


def _tools_problem(tools: Any) -> Problem | None:
    if not isinstance(tools, list):
        return Problem("tools_shape", "Invalid type for 'tools': expected an array.", "tools", "invalid_type")
    names: set[str] = set()
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            return _invalid("tools_shape", f"tools[{index}].type", "Invalid value. Supported values "
                            "include: 'function', 'file_search', 'web_search', 'computer_use_preview'.")
        for name in tool:
            if name not in ("type", "name", "description", "parameters", "strict"):
                return _unknown(f"tools[{index}].{name}")  # chat completions' nested `function`
        if not TOOL_NAME.match(str(tool.get("name"))):
            return _invalid("tool_name_pattern", f"tools[{index}].name", f"Invalid 'tools[{index}].name': "
                            "string does not match pattern. Expected a string that matches the "
                            "pattern '^[a-zA-Z0-9_-]+$'.")
        if tool["name"] in names:
            return _invalid("tool_names_unique", "tools", f"Duplicate tool name: '{tool['name']}'.")
        names.add(tool["name"])
        if not isinstance(tool.get("parameters"), dict):
            return _missing(f"tools[{index}].parameters")
        if tool.get("strict", True) is not False:
            problem = _strict_schema_problem(index, tool)
            if problem:
                return problem
    return None


def _strict_schema_problem(index: int, tool: dict[str, Any]) -> Problem | None:
    """Function tools are strict unless `strict: false`: closed objects, every property required."""
    schema = tool["parameters"]
    properties = sorted(schema.get("properties") or {})
    if schema.get("additionalProperties") is not False or sorted(schema.get("required") or []) != properties:
        return _invalid("strict_schema", f"tools[{index}].parameters", f"Invalid schema for function "
                        f"'{tool['name']}': In context=(), 'additionalProperties' is required to be "
                        "supplied and to be false, and 'required' is required to be supplied and to be "
                        "an array including every key in properties.")
    return None


def _tool_choice_problem(body: dict[str, Any]) -> Problem | None:
    """none/auto/required, or {"type": "function", "name"} naming one of `tools`."""
    choice = body["tool_choice"]
    if choice in ("none", "auto", "required"):
        return None
    if not isinstance(choice, dict) or choice.get("type") != "function":
        return _invalid("tool_choice_shape", "tool_choice", "Invalid value for 'tool_choice': expected "
                        "'none', 'auto', 'required' or a hosted or function tool choice.")
    for name in choice:
        if name not in ("type", "name"):
            return _unknown(f"tool_choice.{name}")  # chat completions' nested `function`
    names = {t.get("name") for t in body.get("tools") or () if isinstance(t, dict)}
    if choice.get("name") not in names:
        return Problem("tool_choice_names_a_tool", f"Tool choice '{choice.get('name')}' not found in "
                       "'tools' parameter.", "tool_choice", None)
    return None


def _text_problem(text: Any) -> Problem | None:
    """`text.format`: text, json_object, or a named json_schema (flat, unlike chat completions)."""
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object", "json_schema"):
        return _invalid("text_format_shape", "text.format.type", "Invalid value for 'text.format.type': "
                        "expected 'text', 'json_object' or 'json_schema'.")
    if fmt["type"] != "json_schema":
        return None
    for name in fmt:
        if name not in ("type", "name", "schema", "strict", "description"):
            return _unknown(f"text.format.{name}")
    if not TOOL_NAME.match(str(fmt.get("name"))):
        return _missing("text.format.name")
    if not isinstance(fmt.get("schema"), dict):
        return _missing("text.format.schema")
    return None


def check(body: Any, memory: Memory, max_context_tokens: int) -> Problem | None:
    """The first thing the Responses API would refuse in this body, or None."""
    if not isinstance(body, dict):
        return Problem("json_body", "We could not parse the JSON body of your request.")
    problem = _parameters_problem(body)
    if problem:
        return problem
    items = body["input"]
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        return Problem("input_not_empty", "Invalid 'input': empty array. Expected an array with minimum "
                       "length 1, but got an empty array instead.", "input", "empty_array")
    for index, item in enumerate(items):
        problem = _item_problem(f"input[{index}]", item)
        if problem:
            return problem
    problem = _calls_problem(items) or _reasoning_problem(items, body, memory)
    if problem is None and "tools" in body:
        problem = _tools_problem(body["tools"])
    if problem is None and "tool_choice" in body:
        problem = _tool_choice_problem(body)
    if problem is None and "text" in body:
        problem = _text_problem(body["text"])
    if problem is None and estimate_tokens([body.get("instructions"), items, body.get("tools")]) > max_context_tokens:
        problem = Problem("context_window", "Your input exceeds the context window of this model. "
                          "Please adjust your input and try again.", "input", "context_length_exceeded")
    return problem
