"""The two provider wire shapes of a neutral request, and each provider's own pairing rules.

`to_openai` / `to_anthropic` build the payloads; `check_openai` / `check_anthropic` state
what those providers reject (docs/design.md §9), so tests and strict emulators share them.
Each message's shape is made once (`Message.memo`) and shared by every payload that holds
it: whoever changes a payload changes copies of what it changes (`prompt_cache` does).
"""
from __future__ import annotations

import json
from typing import Any

from agentq.core.reasoning import for_provider, interleave
from agentq.core.request import Message, Request

ANTHROPIC = "anthropic"  # the provider kind whose reasoning items go back to the Messages API


def _has_text(text: Any) -> bool:
    return isinstance(text, str) and bool(text.strip())


def _openai_part(part: dict[str, Any]) -> dict[str, Any]:
    if part["type"] == "text":
        return {"type": "text", "text": part["text"]}
    url = part.get("url") or f"data:{part['media_type']};base64,{part['data']}"
    return {"type": "image_url", "image_url": {"url": url}}


def _anthropic_part(part: dict[str, Any]) -> dict[str, Any]:
    if part["type"] == "text":
        return {"type": "text", "text": part["text"]}
    if "url" in part:
        return {"type": "image", "source": {"type": "url", "url": part["url"]}}
    return {"type": "image", "source": {"type": "base64", "media_type": part["media_type"],
                                        "data": part["data"]}}


def _openai_message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.text}
    if message.role == "user":
        if message.parts:
            return {"role": "user", "content": [_openai_part(p) for p in message.parts]}
        return {"role": "user", "content": message.text}
    out: dict[str, Any] = {
        "role": "assistant",
        "content": message.text if _has_text(message.text) else None,
    }
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.args, sort_keys=True)},
            }
            for call in message.tool_calls
        ]
    return out


def to_openai(request: Request) -> dict[str, Any]:
    """OpenAI chat completions: system first, one `tool` message per call right after it."""
    messages = [{"role": "system", "content": request.system}] if request.system else []
    messages += [m.memo(_openai_message) for m in request.messages]
    payload: dict[str, Any] = {"model": request.model, "messages": messages}
    if request.tools:
        payload["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters
                },
            }
            for t in request.tools
        ]
    return payload


def _anthropic_blocks(message: Message) -> tuple[str, list[dict[str, Any]]]:
    if message.role == "tool":
        content: str | list[dict[str, Any]] = message.text
        if message.parts:  # a tool server's images, after the text that names them
            text = [{"type": "text", "text": message.text}] if _has_text(message.text) else []
            content = text + [_anthropic_part(p) for p in message.parts]
        block = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": content,
            "is_error": message.is_error,
        }
        return "user", [block]
    if message.parts:
        return message.role, [_anthropic_part(p) for p in message.parts]
    blocks: list[dict[str, Any]] = []
    if _has_text(message.text):
        blocks.append({"type": "text", "text": message.text})
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.args})
    # Thinking blocks go back exactly as returned, in their place (before the tool_use):
    # with thinking on, the API refuses a tool-use round without them.
    return message.role, interleave(blocks, for_provider(message.reasoning, ANTHROPIC))


def to_anthropic(request: Request) -> dict[str, Any]:
    """Anthropic messages: strict alternation, results first in the next user message."""
    messages: list[dict[str, Any]] = []
    for message in request.messages:
        role, blocks = message.memo(_anthropic_blocks)
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:  # a list of its own: the next message's blocks may join it
            messages.append({"role": role, "content": list(blocks)})
    payload: dict[str, Any] = {"model": request.model, "messages": messages}
    if request.system:
        payload["system"] = request.system
    if request.tools:
        payload["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
    return payload


def _check_openai_call(where: str, call: Any) -> list[str]:
    function = call.get("function") if isinstance(call, dict) else None
    if (not isinstance(function, dict) or call.get("type") != "function"
            or not isinstance(call.get("id"), str)):
        return [f"{where}: a tool call needs an id, type 'function' and a function"]
    try:
        arguments: Any = function.get("arguments")  # not text: TypeError, below
        args = json.loads(arguments)
    except (TypeError, ValueError):
        return [f"{where}: function.arguments of {call['id']} is not JSON text"]
    if not isinstance(args, dict) or not isinstance(function.get("name"), str):
        return [f"{where}: tool call {call['id']} needs a name and an arguments object"]
    return []


def _check_openai_message(index: int, message: Any, seen: set[Any]) -> list[str]:
    where = f"messages[{index}]"
    role = message.get("role") if isinstance(message, dict) else None
    if role not in ("system", "user", "assistant", "tool"):
        return [f"{where}: unknown role {role!r}"]
    calls = message.get("tool_calls")
    if role != "assistant":
        content = message.get("content")
        parts = role == "user" and isinstance(content, list) and bool(content) and all(
            isinstance(p, dict) and p.get("type") in ("text", "image_url") for p in content)
        ok = (isinstance(content, str) or parts) and calls is None
        return [] if ok else [f"{where}: a {role} message needs text content and no tool_calls"]
    if calls is not None and (not isinstance(calls, list) or not calls):
        return [f"{where}: tool_calls must be a non-empty list when present"]
    if message.get("content") is None and not calls:
        return [f"{where}: an assistant message needs content or tool_calls"]
    problems = []
    for call in calls or ():
        problems += _check_openai_call(where, call)
        if isinstance(call, dict) and call.get("id") in seen:
            problems.append(f"{where}: duplicate tool call id {call.get('id')}")
        seen.add(call.get("id") if isinstance(call, dict) else None)
    return problems


def _check_openai_pairs(messages: list[Any]) -> list[str]:
    """Each assistant tool_calls message is followed by one tool message per id, nothing else."""
    problems = []
    expected: list[Any] = []  # the ids the calls carry, whatever their JSON type
    for index, message in enumerate(messages + [{"role": "end"}]):
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in expected:
                problems.append(
                    f"messages[{index}]: messages with role 'tool' must be a response "
                    f"to a preceding message with 'tool_calls' ({call_id})"
                )
            else:
                expected.remove(call_id)
            continue
        if expected:
            ids = ", ".join(map(str, expected))
            problems.append(f"messages[{index}]: tool_call_ids did not have responses: {ids}")
        calls = message.get("tool_calls") or []
        expected = [c.get("id") for c in calls if isinstance(c, dict)]
    return problems


def _check_openai_tools(tools: Any) -> list[str]:
    if not isinstance(tools, list) or not tools:
        return ["tools: must be a non-empty list when present"]
    names = [t.get("function", {}).get("name") if isinstance(t, dict) else None for t in tools]
    problems = [
        f"tools[{i}]: needs type 'function' and a function with a name and parameters object"
        for i, t in enumerate(tools)
        if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(names[i], str)
        or not isinstance(t["function"].get("parameters"), dict)
    ]
    if len(set(names)) != len(names):
        problems.append("tools: duplicate function names")
    return problems


def check_openai(payload: dict[str, Any]) -> list[str]:
    """What the OpenAI chat completions endpoint would reject in this payload."""
    messages = payload.get("messages")
    if not isinstance(payload.get("model"), str) or not isinstance(messages, list) or not messages:
        return ["payload: needs a model and a non-empty messages list"]
    if not all(isinstance(m, dict) for m in messages):
        return ["messages: every message must be an object"]
    problems: list[str] = []
    seen: set[Any] = set()  # the calls' ids, whatever their JSON type
    for index, message in enumerate(messages):
        problems += _check_openai_message(index, message, seen)
        late = any(m.get("role") != "system" for m in messages[:index])
        if message.get("role") == "system" and late:
            problems.append(f"messages[{index}]: system messages come first")
    problems += _check_openai_pairs(messages)
    if "tools" in payload:
        problems += _check_openai_tools(payload["tools"])
    return problems


def _check_anthropic_block(where: str, role: str, block: Any) -> list[str]:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text":
        if _has_text(block.get("text")):
            return []
        return [f"{where}: text content blocks must contain non-whitespace text"]
    if kind == "tool_use" and role == "assistant":
        ok = isinstance(block.get("id"), str) and isinstance(block.get("name"), str)
        ok = ok and isinstance(block.get("input"), dict)
        return [] if ok else [f"{where}: tool_use needs an id, a name and an input object"]
    if kind == "image" and role == "user":
        source = block.get("source")
        ok = isinstance(source, dict) and source.get("type") in ("base64", "url")
        return [] if ok else [f"{where}: an image needs a base64 or url source"]
    if kind == "tool_result" and role == "user":
        ok = isinstance(block.get("tool_use_id"), str)
        ok = ok and isinstance(block.get("content", ""), (str, list))
        ok = ok and isinstance(block.get("is_error", False), bool)
        return [] if ok else [f"{where}: tool_result needs a tool_use_id, content, a bool is_error"]
    if kind == "thinking" and role == "assistant":
        ok = isinstance(block.get("thinking"), str) and _has_text(block.get("signature"))
        return [] if ok else [f"{where}: a thinking block needs its thinking and its signature"]
    if kind == "redacted_thinking" and role == "assistant":
        return [] if _has_text(block.get("data")) else [f"{where}: redacted_thinking needs its data"]
    return [f"{where}: a {role} message cannot hold a {kind!r} block"]


def _check_anthropic_message(index: int, message: Any, previous_role: str | None) -> list[str]:
    where = f"messages.{index}"
    role = message.get("role") if isinstance(message, dict) else None
    if role not in ("user", "assistant"):
        return [f"{where}: role must be user or assistant, not {role!r}"]
    problems = []
    if role == previous_role:
        problems.append(f"{where}: roles must alternate between user and assistant")
    if index == 0 and role != "user":
        problems.append(f"{where}: the first message must use the user role")
    content = message.get("content")
    if isinstance(content, str):
        return problems + ([] if _has_text(content) else [f"{where}: content must be non-empty"])
    if not isinstance(content, list) or not content:
        return problems + [f"{where}: content must be a non-empty string or list of blocks"]
    for number, block in enumerate(content):
        problems += _check_anthropic_block(f"{where}.content.{number}", role, block)
    return problems


def _blocks(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == kind]


def _leading_results(message: dict[str, Any]) -> int:
    """How many tool_result blocks open the message's content."""
    count = 0
    content = message.get("content")
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict) or block.get("type") != "tool_result":
            break
        count += 1
    return count


def _check_answers(index: int, uses: list[Any], following: dict[str, Any]) -> list[str]:
    """The message after `index` answers exactly `uses`, with its results first."""
    answered = [b.get("tool_use_id") for b in _blocks(following, "tool_result")]
    problems = []
    if _leading_results(following) != len(answered):
        problems.append(f"messages.{index + 1}: tool_result blocks must come first in the content")
    missing = ", ".join(str(u) for u in uses if u not in answered)
    if missing:
        problems.append(
            f"messages.{index}: tool_use ids were found without tool_result blocks "
            f"immediately after: {missing}"
        )
    extra = [a for a in answered if a not in uses]
    if extra or len(set(answered)) != len(answered):
        ids = ", ".join(map(str, extra or answered))
        problems.append(f"messages.{index + 1}: unexpected or repeated tool_result for {ids}")
    return problems


def _check_anthropic_pairs(messages: list[Any]) -> list[str]:
    """Every tool_use is answered first thing in the very next user message, once."""
    problems = []
    seen: set[Any] = set()
    # A virtual empty response before the first message catches results that answer nothing.
    for index, message in enumerate([{"content": []}] + messages, start=-1):
        uses = [b.get("id") for b in _blocks(message, "tool_use")]
        problems += [f"messages.{index}: duplicate tool_use id {u}" for u in uses if u in seen]
        seen.update(uses)
        following = messages[index + 1] if index + 1 < len(messages) else {"content": []}
        problems += _check_answers(index, uses, following)
    return problems


def _check_anthropic_tools(tools: Any) -> list[str]:
    if not isinstance(tools, list) or not tools:
        return ["tools: must be a non-empty list when present"]
    problems = [
        f"tools.{i}: needs a name and an input_schema object of type object"
        for i, t in enumerate(tools)
        if not isinstance(t, dict) or not isinstance(t.get("name"), str)
        or not isinstance(t.get("input_schema"), dict) or t["input_schema"].get("type") != "object"
    ]
    names = [t.get("name") for t in tools if isinstance(t, dict)]
    if len(set(names)) != len(names):
        problems.append("tools: tool names must be unique")
    return problems


def check_anthropic(payload: dict[str, Any]) -> list[str]:
    """What the Anthropic messages endpoint would reject in this payload."""
    messages = payload.get("messages")
    if not isinstance(payload.get("model"), str) or not isinstance(messages, list) or not messages:
        return ["payload: needs a model and a non-empty messages list"]
    if "system" in payload and not isinstance(payload["system"], (str, list)):
        return ["system: must be a string or a list of text blocks"]
    problems: list[str] = []
    previous: str | None = None
    for index, message in enumerate(messages):
        problems += _check_anthropic_message(index, message, previous)
        previous = message.get("role") if isinstance(message, dict) else None
    if not problems:
        problems += _check_anthropic_pairs(messages)
    if "tools" in payload:
        problems += _check_anthropic_tools(payload["tools"])
    return problems
