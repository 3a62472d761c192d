"""The OpenAI Responses wire shape of a neutral request: instructions and a list of input items.

Each assistant round becomes its reasoning items (those this provider kind returned,
verbatim and in order), then its text as an assistant message, then one `function_call`
item per call; each tool result a `function_call_output` item. A round's reasoning items
go before its text and calls because that is where the model produced them: a response
reasons first, then answers or calls.
"""
from __future__ import annotations

import json
from typing import Any

from agentq.core.request import Message, Request

PROVIDER = "openai_responses"  # the provider kind whose reasoning items these requests carry


def _reasoning_items(message: Message) -> list[dict[str, Any]]:
    return [dict(entry["item"]) for entry in getattr(message, "reasoning", ()) or ()
            if entry.get("provider") == PROVIDER and isinstance(entry.get("item"), dict)]


def _items(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [{"type": "function_call_output", "call_id": message.tool_call_id,
                 "output": message.text}]
    if message.role == "user":
        return [{"role": "user", "content": message.text}]
    items = _reasoning_items(message)
    if message.text.strip():
        items.append({"role": "assistant", "content": message.text})
    items += [
        {"type": "function_call", "call_id": call.id, "name": call.name,
         "arguments": json.dumps(call.args, sort_keys=True)}
        for call in message.tool_calls
    ]
    return items


def to_responses(request: Request) -> dict[str, Any]:
    """The Responses body of `request`: system prompt as `instructions`, history as `input`."""
    payload: dict[str, Any] = {"model": request.model,
                               "input": [item for m in request.messages for item in _items(m)]}
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
