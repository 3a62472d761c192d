"""The OpenAI adapter: streaming chat completions through the official `openai` SDK.

Any OpenAI-compatible endpoint works through a profile's `base_url`. The request body is
built here in full (so the audit records exactly what was sent), the SDK's own retries
are off (one policy, `retry.retrying`, rules), and tool calls are put together from their
deltas by index.
"""
from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import openai

from agentq.core.request import Request
from agentq.core.settings import Settings
from agentq.core.wire import to_openai
from agentq.providers.answer import Answer
from agentq.providers.base import CallContext, Delta, ModelResponse
from agentq.providers.connection import endpoint_of, private, timeout
from agentq.providers.openai_errors import OPENAI_ERRORS
from agentq.providers.options import AnswerOptions, answer_options
from agentq.providers.pool import CLIENTS
from agentq.providers.streaming import stream_call

KIND = "openai"
# Sent as the SDK's named arguments; everything else goes through `extra_body` untouched.
_NAMED = ("model", "messages", "stream")
# o1, o3-mini, o4-mini, gpt-5, gpt-5-mini, ... (a "provider/" prefix aside).
_REASONING_MODELS = re.compile(r"^(o[1-9]|gpt-5)")
_NOT_FOR_REASONING = ("temperature", "top_p", "presence_penalty", "frequency_penalty",
                      "logprobs", "top_logprobs", "logit_bias")


def reasoning_model(model: str) -> bool:
    """Whether `model` is an OpenAI reasoning model (o-series, gpt-5*), which takes
    `max_completion_tokens` and `reasoning_effort` and refuses sampling options."""
    return bool(_REASONING_MODELS.match(model.rsplit("/", 1)[-1]))


def chat_body(request: Request, settings: Settings, purpose: str = "answer") -> dict[str, Any]:
    """The whole JSON body of a streaming chat completion for this request."""
    body = to_openai(request)
    body["model"] = body["model"] or settings.model
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    reasoning = reasoning_model(body["model"] or "")
    if settings.max_tokens is not None:
        body["max_completion_tokens" if reasoning else "max_tokens"] = settings.max_tokens
    if reasoning and settings.reasoning_effort is not None:
        body["reasoning_effort"] = settings.reasoning_effort
    if not reasoning and settings.temperature is not None:
        body["temperature"] = settings.temperature
    body.update(_answer_options(answer_options(request, settings, purpose)))
    for name, value in (settings.extra_body or {}).items():
        body.setdefault(name, value)  # extra_body adds options; it never replaces the above
    if reasoning:  # "Unsupported parameter" on reasoning models, whoever set them
        for name in _NOT_FOR_REASONING:
            body.pop(name, None)
        if "max_tokens" in body:
            body.setdefault("max_completion_tokens", body.pop("max_tokens"))
    return body


def _answer_options(options: AnswerOptions) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if options.tool_choice == "tool":
        out["tool_choice"] = {"type": "function", "function": {"name": options.tool_name}}
    elif options.tool_choice is not None:
        out["tool_choice"] = options.tool_choice
    if options.parallel_tool_calls is not None:
        out["parallel_tool_calls"] = options.parallel_tool_calls
    if options.schema is not None:
        out["response_format"] = {"type": "json_schema", "json_schema": {
            "name": options.schema_name, "schema": options.schema, "strict": options.strict}}
    return out


class OpenAIProvider:
    """Chat completions on an OpenAI-compatible endpoint; endpoint and key from the call's profile."""

    def stream(
        self, request: Request, ctx: CallContext, cancel: threading.Event
    ) -> Iterator[Delta | ModelResponse]:
        settings = ctx.settings
        url, key = endpoint_of(ctx)
        body = chat_body(request, settings, ctx.purpose)

        def open_stream() -> Any:
            client = CLIENTS.get(KIND, url, key, lambda http: openai.OpenAI(
                api_key=key, base_url=url, max_retries=0, http_client=http))
            return ChunkStream(client.chat.completions.with_streaming_response.create(
                model=body["model"],
                messages=body["messages"],
                stream=True,
                timeout=timeout(settings),
                extra_body={k: v for k, v in body.items() if k not in _NAMED},
            ))

        reader = _ChunkReader()
        yield from stream_call(
            open_stream, reader.read, Answer(ctx.step_key), sent=body, cancel=cancel,
            secrets=private(url, key), sdk=OPENAI_ERRORS,
        )


class ChunkStream:
    """The chunks of a streamed chat completion, read from the raw response.

    Why not the SDK's own stream: the sync SDK stops at `[DONE]` and closes the response
    with the end of its body unread, and an HTTP/1.1 connection closed that way is not
    reused, so every call would pay a new handshake. Here the body is read to its end.
    """

    def __init__(self, manager: Any) -> None:
        self._manager = manager
        self._raw = manager.__enter__()  # status errors raise here, as the SDK's own

    def __iter__(self) -> Iterator[Any]:
        lines = self._raw.iter_lines()
        for line in lines:
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data.startswith("[DONE]"):
                for _ in lines:  # the rest of the body: the connection goes back to the pool
                    pass
                return
            chunk = json.loads(data)
            if isinstance(chunk, dict) and chunk.get("error"):
                error = chunk["error"]
                message = error.get("message") if isinstance(error, dict) else None
                raise openai.APIError(message or "An error occurred during streaming",
                                      self._raw.http_response.request, body=error)
            yield _namespace(chunk)

    def close(self) -> None:
        self._manager.__exit__(None, None, None)


def _namespace(value: Any) -> Any:
    """JSON as attributes (what the chunk reader reads), lists and scalars as they are."""
    if isinstance(value, dict):
        return SimpleNamespace(**{key: _namespace(item) for key, item in value.items()})
    if isinstance(value, list):
        return [_namespace(item) for item in value]
    return value


class _ChunkReader:
    """Reads `chat.completion.chunk`s; a call's fragments share its `index` (its slot)."""

    def __init__(self) -> None:
        self._slots: dict[int, tuple[int, int]] = {}  # index -> (index, generation)

    def read(self, chunk: Any, answer: Answer) -> str | None:
        if getattr(chunk, "usage", None) is not None:
            answer.usage = _usage(chunk.usage)
        answer.model = getattr(chunk, "model", None) or answer.model
        pieces = []
        for choice in getattr(chunk, "choices", None) or ():
            if getattr(choice, "index", 0) != 0:
                continue  # only the first choice is the answer
            delta = getattr(choice, "delta", None)
            for text in (getattr(delta, "content", None), getattr(delta, "refusal", None)):
                if text:
                    pieces.append(answer.add_text(text))
            for position, call in enumerate(getattr(delta, "tool_calls", None) or ()):
                self._read_call(call, position, answer)
            finish = getattr(choice, "finish_reason", None)
            if finish:
                answer.finish_reason = _FINISH.get(finish, finish)
        return "".join(pieces) or None

    def _read_call(self, call: Any, position: int, answer: Answer) -> None:
        index = getattr(call, "index", None)
        index = index if index is not None else position
        call_id = getattr(call, "id", None)
        slot = self._slots.get(index, (index, 0))
        known = answer.call_id(slot)
        if call_id and known and call_id != known:
            # Some compatible servers reuse an index for the next call: a new id is a new call.
            slot = (index, slot[1] + 1)
        self._slots[index] = slot
        function = getattr(call, "function", None)
        answer.add_call(
            slot,
            call_id=call_id,
            name=getattr(function, "name", None),
            args=getattr(function, "arguments", None),
        )


_FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool_calls",
           "function_call": "tool_calls", "content_filter": "content_filter"}


def _usage(usage: Any) -> dict[str, Any]:
    """OpenAI usage in the neutral names (input/output tokens), with the details it has."""
    out = {
        "input_tokens": getattr(usage, "prompt_tokens", None) or 0,
        "output_tokens": getattr(usage, "completion_tokens", None) or 0,
    }
    cached = getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", None)
    reasoning = getattr(getattr(usage, "completion_tokens_details", None), "reasoning_tokens", None)
    if cached:
        out["cache_read_input_tokens"] = cached
    if reasoning:
        out["reasoning_tokens"] = reasoning
    return out
