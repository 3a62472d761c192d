"""An emulator of OpenAI chat completions: its own checks, its error shape, its chunk stream.

The checks are written from the API's documented behaviour, independently of agentq's
`wire.check_openai`: one error at a time, with OpenAI's status, message, param and code.
"""
from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

from tests.support.emulators.openai_options import options_problem
from tests.support.emulators.script import Reply, estimate_tokens, pieces
from tests.support.emulators.server import Emulator

ROLES = ("system", "developer", "user", "assistant", "tool")
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
Problem = tuple[str, str | None, str | None]  # message, param, code
_KINDS = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
          429: "requests", 500: "server_error", 503: "server_error"}


def _missing(param: str) -> Problem:
    return f"Missing required parameter: '{param}'.", param, "missing_required_parameter"


def _content_problem(where: str, role: str, message: dict[str, Any]) -> Problem | None:
    content = message.get("content")
    if role == "assistant":
        if content is None and not message.get("tool_calls"):
            return ("Invalid value for 'content': expected a string, got null.", f"{where}.content", None)
        return None
    if "content" not in message:
        return _missing(f"{where}.content")
    if isinstance(content, str):
        return None
    if isinstance(content, list) and content and all(
        isinstance(p, dict) and p.get("type") in ("text", "image_url") for p in content
    ):
        return _image_urls_problem(where, content)
    return (f"Invalid type for '{where}.content': expected one of a string or array of objects.",
            f"{where}.content", "invalid_type")


_DATA_URL = re.compile(r"^data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/]+=*$")


def _image_urls_problem(where: str, parts: list[dict[str, Any]]) -> Problem | None:
    """Vision: an image_url is an https URL or a base64 data URL of PNG, JPEG, WEBP or GIF."""
    for number, part in enumerate(parts):
        image = part.get("image_url") if part["type"] == "image_url" else None
        url = image.get("url") if isinstance(image, dict) else None
        if part["type"] == "image_url" and not (
                isinstance(url, str) and (url.startswith("https://") or _DATA_URL.match(url))):
            return ("Invalid image URL: expected an https URL or a base64 data URL of a supported "
                    "image type.", f"{where}.content.[{number}].image_url.url", "invalid_image_url")
    return None


def _call_problem(where: str, call: Any) -> Problem | None:
    if not isinstance(call, dict) or not isinstance(call.get("id"), str):
        return _missing(f"{where}.id")
    if call.get("type") != "function":
        return (f"Invalid value: '{call.get('type')}'. Supported values are: 'function'.",
                f"{where}.type", "invalid_value")
    function = call.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        return _missing(f"{where}.function.name")
    if not isinstance(function.get("arguments"), str):
        return (f"Invalid type for '{where}.function.arguments': expected a string.",
                f"{where}.function.arguments", "invalid_type")
    return None


def _message_problem(index: int, message: Any) -> Problem | None:
    where = f"messages.[{index}]"
    if not isinstance(message, dict):
        return (f"Invalid type for '{where}': expected an object.", where, "invalid_type")
    role = message.get("role")
    if role not in ROLES:
        return (f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', "
                "'tool', 'function', and 'developer'.", f"{where}.role", "invalid_value")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        return _missing(f"{where}.tool_call_id")
    calls = message.get("tool_calls")
    if calls is not None:
        if role != "assistant" or not isinstance(calls, list) or not calls:
            return (f"Invalid 'messages[{index}].tool_calls': empty array or not allowed here.",
                    f"{where}.tool_calls", "invalid_value")
        for number, call in enumerate(calls):
            problem = _call_problem(f"{where}.tool_calls.[{number}]", call)
            if problem:
                return problem
    return _content_problem(where, role, message)


def _pairing_problem(messages: list[dict[str, Any]]) -> Problem | None:
    """Each assistant message with tool_calls is followed by one tool message per call id."""
    waiting: list[str] = []
    asked_at = 0
    for index, message in enumerate(messages):
        if message["role"] == "tool":
            if message["tool_call_id"] not in waiting:
                return ("Invalid parameter: messages with role 'tool' must be a response to a "
                        "preceeding message with 'tool_calls'.", f"messages.[{index}].role", None)
            waiting.remove(message["tool_call_id"])
            continue
        if waiting:
            break
        waiting = [call["id"] for call in message.get("tool_calls") or ()]
        asked_at = index
    if waiting:
        return ("An assistant message with 'tool_calls' must be followed by tool messages responding "
                "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                + ", ".join(waiting), f"messages.[{asked_at}].role", None)
    return None


def _tools_problem(tools: Any) -> Problem | None:
    if not isinstance(tools, list):
        return ("Invalid type for 'tools': expected an array.", "tools", "invalid_type")
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or tool.get("type") != "function":
            return _missing(f"tools[{index}].function")
        if not TOOL_NAME.match(str(function.get("name"))):
            return (f"Invalid 'tools[{index}].function.name': string does not match pattern. "
                    "Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
                    f"tools[{index}].function.name", "invalid_value")
        if "parameters" in function and not isinstance(function["parameters"], dict):
            return (f"Invalid type for 'tools[{index}].function.parameters': expected an object.",
                    f"tools[{index}].function.parameters", "invalid_type")
    return None


def check(body: Any, max_context_tokens: int) -> Problem | None:
    """The first thing OpenAI would reject in this body, or None."""
    if not isinstance(body, dict):
        return ("We could not parse the JSON body of your request.", None, None)
    if not isinstance(body.get("model"), str) or not body["model"]:
        return ("you must provide a model parameter", None, None)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ("Invalid 'messages': empty array. Expected an array with minimum length 1, but got "
                "an empty array instead.", "messages", "empty_array")
    for index, message in enumerate(messages):
        problem = _message_problem(index, message)
        if problem:
            return problem
    problem = _pairing_problem(messages) or options_problem(body)
    if problem is None and "tools" in body:
        problem = _tools_problem(body["tools"])
    if problem is None and "stream_options" in body and body.get("stream") is not True:
        problem = ("The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                   "stream_options", "invalid_value")
    if problem is None:
        tokens = estimate_tokens([messages, body.get("tools")])
        if tokens > max_context_tokens:
            problem = (f"This model's maximum context length is {max_context_tokens} tokens. However, "
                       f"your messages resulted in {tokens} tokens. Please reduce the length of the "
                       "messages.", "messages", "context_length_exceeded")
    return problem


class OpenAIEmulator(Emulator):
    """POST /v1/chat/completions, streaming only (the adapters never ask otherwise)."""

    path = "/v1/chat/completions"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.prefixes: set[str] = set()  # automatic prompt caching: message prefixes seen

    def clear(self) -> None:
        super().clear()
        self.prefixes = set()

    def cached_tokens(self, body: dict[str, Any]) -> int:
        """OpenAI caches prompt prefixes on its own: the longest run of leading messages
        (tools first) sent before is read from cache (the 1024-token minimum not modelled)."""
        seen, cached = [body.get("tools")], 0
        for message in body["messages"]:
            seen.append(message)
            key = json.dumps(seen, sort_keys=True)
            if key in self.prefixes:
                cached = estimate_tokens(seen[1:])
            self.prefixes.add(key)
        return cached

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def authorized(self, headers: dict[str, str]) -> tuple[int, str, str] | None:
        return openai_key_refusal(self.api_key, headers)

    def refusal(self, body: Any, headers: dict[str, str]) -> dict[str, Any] | None:
        problem = check(body, self.max_context_tokens)
        if problem is None:
            return None
        message, param, code = problem
        return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}

    def error_body(self, status: int, message: str, kind: str | None, code: str | None) -> dict[str, Any]:
        kind = kind or _KINDS.get(status, "server_error" if status >= 500 else "invalid_request_error")
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def error_frame(self, kind: str) -> bytes:
        error = {"message": "The server had an error while processing your request.", "type": kind,
                 "param": None, "code": None}
        return b"data: " + json.dumps({"error": error}).encode() + b"\n\n"

    def frames(self, reply: Reply, body: dict[str, Any]) -> Iterator[tuple[str, bytes]]:
        base = {"id": self.next_id("chatcmpl-emu"), "object": "chat.completion.chunk",
                "created": int(time.time()), "model": body["model"], "system_fingerprint": None}
        usage_wanted = bool((body.get("stream_options") or {}).get("include_usage"))

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            extra = {"usage": None} if usage_wanted else {}
            return _data({**base, "choices": [choice], **extra})

        yield "text", chunk({"role": "assistant", "content": "", "refusal": None})
        for piece in pieces(reply.text, reply.chunks):
            yield "text", chunk({"content": piece})
        for index, call in enumerate(reply.calls):
            head = {"index": index, "id": self.next_id("call_emu"), "type": "function",
                    "function": {"name": call.name, "arguments": ""}}
            yield "end", chunk({"tool_calls": [head]})
            for piece in pieces(call.args_text, 3):
                yield "end", chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        yield "end", chunk({}, reply.finish or ("tool_calls" if reply.calls else "stop"))
        if usage_wanted:
            prompt = estimate_tokens(body["messages"])
            completion = estimate_tokens([reply.text, [c.args_text for c in reply.calls]])
            usage = {"prompt_tokens": prompt, "completion_tokens": completion,
                     "total_tokens": prompt + completion,
                     "prompt_tokens_details": {"cached_tokens": min(prompt, self.cached_tokens(body))}}
            yield "end", _data({**base, "choices": [], "usage": usage})
        yield "end", b"data: [DONE]\n\n"


def _data(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def openai_key_refusal(api_key: str, headers: dict[str, str]) -> tuple[int, str, str] | None:
    """The OpenAI API's 401 for a missing or wrong bearer key (both of its APIs answer alike)."""
    given = headers.get("authorization", "").removeprefix("Bearer ")
    if given == api_key:
        return None
    masked = given[:3] + "*" * max(len(given) - 7, 0) + given[-4:]
    return (401, "invalid_request_error", f"Incorrect API key provided: {masked}. You can find "
            "your API key at https://platform.openai.com/account/api-keys.")
