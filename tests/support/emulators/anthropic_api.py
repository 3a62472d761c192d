"""An emulator of the Anthropic messages API: its own checks, its error shape, its event stream.

The checks are written from the API's documented behaviour, independently of agentq's
`wire.check_anthropic`: strict alternation starting with a user message, every
`tool_use` answered first thing in the very next user message, one error at a time.
"""
from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator
from typing import Any

from tests.support.emulators import anthropic_thinking as thinking
from tests.support.emulators.anthropic_cache import PromptCache, breakpoints_problem
from tests.support.emulators.anthropic_options import options_problem
from tests.support.emulators.script import Reply, estimate_tokens, pieces
from tests.support.emulators.server import Emulator

TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
_KINDS = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
          500: "api_error", 529: "overloaded_error"}
_BLOCKS = {"user": ("text", "image", "document", "tool_result"),
           "assistant": ("text", "tool_use", "thinking", "redacted_thinking")}


def _block_problem(where: str, role: str, block: Any) -> str | None:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind not in _BLOCKS[role]:
        return (f"{where}.type: Input tag '{kind}' found using 'type' does not match any of the "
                f"expected tags for a {role} message")
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str) or not text:
            return f"{where}.text: text content blocks must be non-empty"
        if not text.strip():
            return f"{where}.text: text content blocks must contain non-whitespace text"
    if kind == "tool_use":
        if not TOOL_ID.match(str(block.get("id"))):
            return f"{where}.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
        if not isinstance(block.get("name"), str) or not isinstance(block.get("input"), dict):
            return f"{where}: tool_use blocks need a name and an input object"
    if kind == "image":
        return _image_problem(where, block.get("source"))
    if kind == "tool_result":
        if not isinstance(block.get("tool_use_id"), str):
            return f"{where}.tool_use_id: Field required"
        if not isinstance(block.get("content", ""), (str, list)):
            return f"{where}.content: Input should be a valid string or list"
        if not isinstance(block.get("is_error", False), bool):
            return f"{where}.is_error: Input should be a valid boolean"
    return None


IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
MAX_IMAGE_BYTES = 5 * 1024 * 1024


def _image_problem(where: str, source: Any) -> str | None:
    """Vision: a base64 source of a supported type (JPEG, PNG, GIF, WebP) up to 5 MB, or a URL."""
    kind = source.get("type") if isinstance(source, dict) else None
    if kind == "url":
        url = source.get("url")
        return None if isinstance(url, str) and url.startswith(("https://", "http://")) else (
            f"{where}.source.url: Input should be a valid URL")
    if kind != "base64":
        return f"{where}.source: Input tag '{kind}' does not match 'base64', 'url'"
    if source.get("media_type") not in IMAGE_TYPES:
        return (f"{where}.source.media_type: Input should be 'image/jpeg', 'image/png', "
                "'image/gif' or 'image/webp'")
    try:
        size = len(base64.b64decode(source.get("data") or "", validate=True))
    except (binascii.Error, ValueError):
        return f"{where}.source.data: Invalid base64 data"
    return f"{where}.source.data: image exceeds 5 MB maximum" if size > MAX_IMAGE_BYTES else None


def _message_problem(index: int, message: Any, previous: str | None) -> str | None:
    where = f"messages.{index}"
    role = message.get("role") if isinstance(message, dict) else None
    if role not in ("user", "assistant"):
        return f"{where}.role: Input should be 'user' or 'assistant'"
    if index == 0 and role != "user":
        return 'messages: first message must use the "user" role'
    if role == previous:
        return (f'messages: roles must alternate between "user" and "assistant", but found '
                f'multiple "{role}" roles in a row')
    content = message.get("content")
    if isinstance(content, str):
        return None if content.strip() else f"{where}.content: messages must have non-empty content"
    if not isinstance(content, list) or not content:
        return f"{where}.content: messages must have non-empty content"
    for number, block in enumerate(content):
        problem = _block_problem(f"{where}.content.{number}", role, block)
        if problem:
            return problem
    return None


def _blocks(message: dict[str, Any], kind: str) -> list[tuple[int, dict[str, Any]]]:
    content = message["content"] if isinstance(message["content"], list) else []
    return [(n, b) for n, b in enumerate(content) if b.get("type") == kind]


def _results_problem(index: int, message: dict[str, Any], asked: list[str]) -> str | None:
    """The user message at `index` answers exactly `asked`, results before anything else."""
    results = _blocks(message, "tool_result")
    answered: list[str] = []
    for number, block in results:
        if number != len(answered):
            return (f"messages.{index}.content.{number}: tool_result blocks must come first in the "
                    "user message content, before any other block")
        if block["tool_use_id"] not in asked:
            return (f"messages.{index}.content.{number}: unexpected `tool_use_id` found in "
                    f"`tool_result` blocks: {block['tool_use_id']}. Each `tool_result` block must "
                    "have a corresponding `tool_use` block in the previous message.")
        if block["tool_use_id"] in answered:
            return (f"messages.{index}.content.{number}: each tool_use must have a single result. "
                    f"Found multiple `tool_result` blocks with id: {block['tool_use_id']}")
        answered.append(block["tool_use_id"])
    missing = [u for u in asked if u not in answered]
    if missing:
        return (f"messages.{index - 1}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                "corresponding `tool_result` block in the next message.")
    return None


def _pairing_problem(messages: list[dict[str, Any]]) -> str | None:
    seen: set[str] = set()
    asked: list[str] = []
    for index, message in enumerate(messages):
        if message["role"] == "user":
            problem = _results_problem(index, message, asked)
            if problem:
                return problem
            asked = []
            continue
        asked = [b["id"] for _, b in _blocks(message, "tool_use")]
        for number, block in _blocks(message, "tool_use"):
            if block["id"] in seen:
                return f"messages.{index}.content.{number}: `tool_use` ids must be unique"
            seen.add(block["id"])
    if asked:
        return _results_problem(len(messages), {"content": []}, asked)
    return None


def _final_problem(messages: list[dict[str, Any]]) -> str | None:
    """A request ending in an assistant message asks to continue it: no trailing whitespace."""
    last = messages[-1]
    if last["role"] != "assistant":
        return None
    content = last["content"]
    text = content if isinstance(content, str) else (content[-1].get("text") or "x")
    if text != text.rstrip():
        return "messages: final assistant content cannot end with trailing whitespace"
    return None


TOOLS_REQUIRED = "Requests which include `tool_use` or `tool_result` blocks must define tools."


def _undeclared_tools_problem(body: dict[str, Any]) -> str | None:
    """Tool blocks in the history need a `tools` definition, even when no tool may be called."""
    kinds = {block.get("type") for message in body["messages"]
             if isinstance(message.get("content"), list) for block in message["content"]}
    if kinds & {"tool_use", "tool_result"} and not body.get("tools"):
        return TOOLS_REQUIRED
    return None


def _tools_problem(tools: Any) -> str | None:
    if not isinstance(tools, list):
        return "tools: Input should be a valid list"
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or not TOOL_NAME.match(str(tool.get("name"))):
            return f"tools.{index}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
        schema = tool.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            return f"tools.{index}.input_schema.type: Input should be 'object'"
    return None


def _body_problem(body: Any, headers: dict[str, str]) -> str | None:
    if "anthropic-version" not in headers:
        return "anthropic-version: header is required"
    if not isinstance(body, dict):
        return "There was an issue with the request body: it is not JSON"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: Field required"
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        return "max_tokens: Field required"
    system = body.get("system", "")
    if not isinstance(system, (str, list)):
        return "system: Input should be a valid string or list of text blocks"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    return None


def check(body: Any, headers: dict[str, str], max_context_tokens: int) -> str | None:
    """The first thing Anthropic would reject in this request, or None."""
    problem = _body_problem(body, headers) or thinking.settings_problem(body)
    if problem:
        return problem
    messages = body["messages"]
    previous = None
    for index, message in enumerate(messages):
        problem = _message_problem(index, message, previous)
        if problem:
            return problem
        previous = message["role"]
    problem = _pairing_problem(messages) or _final_problem(messages)
    problem = problem or thinking.blocks_problem(messages) or thinking.tool_round_problem(body)
    problem = problem or options_problem(body) or breakpoints_problem(body)
    problem = problem or _undeclared_tools_problem(body)
    if problem is None and "tools" in body:
        problem = _tools_problem(body["tools"])
    if problem is None:
        tokens = estimate_tokens([body.get("system"), messages, body.get("tools")])
        if tokens > max_context_tokens:
            problem = f"prompt is too long: {tokens} tokens > {max_context_tokens} maximum"
    return problem


class AnthropicEmulator(Emulator):
    """POST /v1/messages, streaming only (the adapters never ask otherwise)."""

    path = "/v1/messages"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.cache = PromptCache()

    def clear(self) -> None:
        super().clear()
        self.cache = PromptCache()

    @property
    def base_url(self) -> str:
        return self.url

    def authorized(self, headers: dict[str, str]) -> tuple[int, str, str] | None:
        bearer = headers.get("authorization", "").removeprefix("Bearer ")
        if self.api_key in (headers.get("x-api-key"), bearer):  # SDK 2.x sends a bearer
            return None
        return 401, "authentication_error", "invalid x-api-key"

    def refusal(self, body: Any, headers: dict[str, str]) -> dict[str, Any] | None:
        problem = check(body, headers, self.max_context_tokens)
        return None if problem is None else self.error_body(400, problem, None, None)

    def error_body(self, status: int, message: str, kind: str | None, code: str | None) -> dict[str, Any]:
        kind = kind or _KINDS.get(status, "api_error" if status >= 500 else "invalid_request_error")
        error: dict[str, Any] = {"type": kind, "message": message}
        if code is not None and status != 401:
            error["details"] = {"error_code": code}
        return {"type": "error", "error": error}

    def error_frame(self, kind: str) -> bytes:
        return _event("error", {"type": "error", "error": {"type": kind, "message": "Overloaded"}})

    def frames(self, reply: Reply, body: dict[str, Any]) -> Iterator[tuple[str, bytes]]:
        usage = {**self.cache.usage(body), "output_tokens": 1}
        message = {"id": self.next_id("msg_emu"), "type": "message", "role": "assistant",
                   "model": body["model"], "content": [], "stop_reason": None, "stop_sequence": None,
                   "usage": usage}
        yield "text", _event("message_start", {"type": "message_start", "message": message})
        yield "text", _event("ping", {"type": "ping"})
        index = 0
        if reply.thinking and thinking.enabled(body):  # thinking comes only when asked for
            start = {"type": "thinking", "thinking": "", "signature": ""}
            yield from (("text", f) for f in _block(index, start, [
                {"type": "thinking_delta", "thinking": p} for p in pieces(reply.thinking, 2)
            ] + [{"type": "signature_delta", "signature": thinking.signature(reply.thinking)}]))
            index += 1
        if reply.redacted and thinking.enabled(body):
            start = {"type": "redacted_thinking", "data": thinking.redacted_data(self.next_id("rt"))}
            yield from (("text", f) for f in _block(index, start, []))
            index += 1
        if reply.text:
            yield from (("text", f) for f in _block(index, {"type": "text", "text": ""}, [
                {"type": "text_delta", "text": p} for p in pieces(reply.text, reply.chunks)
            ]))
            index += 1
        for call in reply.calls:
            start = {"type": "tool_use", "id": self.next_id("toolu_emu"), "name": call.name, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces(call.args_text, 3)]
            yield from (("end", f) for f in _block(index, start, deltas))
            index += 1
        output = estimate_tokens([reply.text, [c.args_text for c in reply.calls]])
        stop = reply.finish or ("tool_use" if reply.calls else "end_turn")
        yield "end", _event("message_delta", {"type": "message_delta",
                                              "delta": {"stop_reason": stop, "stop_sequence": None},
                                              "usage": {"output_tokens": output}})
        yield "end", _event("message_stop", {"type": "message_stop"})


def _block(index: int, start: dict[str, Any], deltas: list[dict[str, Any]]) -> Iterator[bytes]:
    yield _event("content_block_start",
                 {"type": "content_block_start", "index": index, "content_block": start})
    for delta in deltas:
        yield _event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
    yield _event("content_block_stop", {"type": "content_block_stop", "index": index})


def _event(name: str, payload: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode()
