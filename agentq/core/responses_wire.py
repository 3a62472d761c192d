"""The OpenAI Responses wire shape of a neutral request: instructions and a list of input items.

Each assistant round becomes its text as an assistant message and one `function_call`
item per call, with the reasoning items this provider kind returned put back verbatim at
their place in the response's output (so each goes before the call it preceded, as the
API requires); each tool result becomes a `function_call_output` item, and a user
message's images `input_image` parts.
"""
from __future__ import annotations

import json
from typing import Any

from agentq.core.reasoning import for_provider, interleave
from agentq.core.request import Message, Request

PROVIDER = "openai_responses"  # the provider kind whose reasoning items these requests carry


def _part(part: dict[str, Any]) -> dict[str, Any]:
    """A user message's text or image part as a Responses input part (a data URL for base64)."""
    if part["type"] == "text":
        return {"type": "input_text", "text": part["text"]}
    url = part.get("url") or f"data:{part['media_type']};base64,{part['data']}"
    return {"type": "input_image", "image_url": url, "detail": "auto"}


def _items(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        output: str | list[dict[str, Any]] = message.text
        if message.parts:  # a tool server's images, after the text that names them
            output = [_part({"type": "text", "text": message.text}), *map(_part, message.parts)]
        return [{"type": "function_call_output", "call_id": message.tool_call_id,
                 "output": output}]
    if message.role == "user" and message.parts:
        return [{"role": "user", "content": [_part(p) for p in message.parts]}]
    if message.role == "user":
        return [{"role": "user", "content": message.text}]
    items = [{"role": "assistant", "content": message.text}] if message.text.strip() else []
    items += [
        {"type": "function_call", "call_id": call.id, "name": call.name,
         "arguments": json.dumps(call.args, sort_keys=True)}
        for call in message.tool_calls
    ]
    return interleave(items, for_provider(message.reasoning, PROVIDER))


def to_responses(request: Request) -> dict[str, Any]:
    """The Responses body of `request`: system prompt as `instructions`, history as `input`."""
    items = [item for message in request.messages for item in message.memo(_items)]
    payload: dict[str, Any] = {"model": request.model, "input": items}
    if request.system:
        payload["instructions"] = request.system
    if request.tools:
        # strict: false, since the Responses API makes function tools strict by default and
        # a schema made from type hints (optional arguments) is not a strict schema.
        payload["tools"] = [
            {"type": "function", "name": t.name, "description": t.description,
             "parameters": t.parameters, "strict": False}
            for t in request.tools
        ]
    return payload


def _check_item(index: int, item: dict[str, Any], calls: list[Any], answered: set[Any]) -> list[str]:
    kind = item.get("type", "message")
    where = f"input[{index}]"
    if kind == "function_call":
        if item.get("call_id") in calls:
            return [f"{where}: duplicate call_id {item.get('call_id')}"]
        calls.append(item.get("call_id"))
    elif kind == "function_call_output":
        if item.get("call_id") not in calls:
            return [f"{where}: no function_call earlier in the input has call_id {item.get('call_id')}"]
        if item.get("call_id") in answered:
            return [f"{where}: a second output for call_id {item.get('call_id')}"]
        answered.add(item.get("call_id"))
    elif kind == "reasoning" and not item.get("encrypted_content"):
        return [f"{where}: reasoning item {item.get('id')} has no encrypted_content (store is false)"]
    elif kind == "message" and not isinstance(item.get("content"), (str, list)):
        return [f"{where}: a message needs content"]
    return []


def check_responses(payload: dict[str, Any]) -> list[str]:
    """What the Responses API would refuse in this stateless payload: calls and their outputs
    unpaired, reasoning items that cannot be sent back."""
    items = payload.get("input")
    if not isinstance(payload.get("model"), str) or not isinstance(items, list) or not items:
        return ["payload: needs a model and a non-empty input list"]
    problems: list[str] = []
    calls: list[Any] = []  # call ids as the input has them, checked here
    answered: set[Any] = set()
    for index, item in enumerate(items):
        problems += _check_item(index, item, calls, answered)
    problems += [f"input: function call {c} has no function_call_output" for c in calls if c not in answered]
    return problems
