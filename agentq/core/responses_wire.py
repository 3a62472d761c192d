"""The OpenAI Responses wire shape of a neutral request: instructions and a list of input items.

Each assistant round becomes its text as an assistant message and one `function_call`
item per call, with the reasoning items this provider kind returned put back verbatim at
their place in the response's output (so each goes before the call it preceded, as the
API requires); each tool result becomes a `function_call_output` item.
"""
from __future__ import annotations

import json
from typing import Any

from agentq.core.reasoning import for_provider, interleave
from agentq.core.request import Message, Request

PROVIDER = "openai_responses"  # the provider kind whose reasoning items these requests carry


def _items(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [{"type": "function_call_output", "call_id": message.tool_call_id,
                 "output": message.text}]
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
