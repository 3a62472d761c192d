"""The Anthropic adapter: streaming messages through the official `anthropic` SDK.

The request body is built here in full (so the audit records exactly what was sent);
`max_tokens`, which Anthropic requires, comes from settings or DEFAULT_MAX_TOKENS. The
SDK's own retries are off (one policy, `retry.retrying`, rules). Text deltas stream;
`tool_use` blocks are put together from their `input_json_delta`s; `thinking` and
`redacted_thinking` blocks are not answer text: they are kept whole, signature included,
as the round's reasoning items, and `to_anthropic` sends them back before the tool_use.
Every request carries prompt-cache breakpoints (`prompt_cache`); the client and its
connections are the endpoint's, shared in the process (`pool`).
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import anthropic

from agentq.core.request import Request
from agentq.core.settings import Settings
from agentq.core.wire import to_anthropic
from agentq.providers.answer import Answer
from agentq.providers.anthropic_errors import ANTHROPIC_ERRORS
from agentq.providers.base import CallContext, Delta, ModelResponse
from agentq.providers.connection import endpoint_of, private, timeout
from agentq.providers.options import AnswerOptions, answer_options
from agentq.providers.pool import CLIENTS
from agentq.providers.prompt_cache import with_breakpoints
from agentq.providers.streaming import stream_call

KIND = "anthropic"  # the provider kind whose reasoning items this adapter sends back
DEFAULT_MAX_TOKENS = 4096
# Sent as the SDK's named arguments; everything else goes through `extra_body` untouched.
_NAMED = ("model", "messages", "max_tokens", "stream", "system")
# Anthropic's stop reasons in the neutral (OpenAI) words the rest of agentq uses.
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
           "tool_use": "tool_calls", "refusal": "content_filter"}


def messages_body(request: Request, settings: Settings, purpose: str = "answer") -> dict[str, Any]:
    """The whole JSON body of a streaming messages request for this request."""
    body = to_anthropic(request)
    body["model"] = body["model"] or settings.model
    body["max_tokens"] = settings.max_tokens or DEFAULT_MAX_TOKENS
    body["stream"] = True
    if settings.thinking is not None:
        budget = settings.thinking.budget_tokens
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        body["max_tokens"] = settings.max_tokens or budget + DEFAULT_MAX_TOKENS
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    body.update(_answer_options(answer_options(request, settings, purpose)))
    for name, value in (settings.extra_body or {}).items():
        body.setdefault(name, value)  # extra_body adds options; it never replaces the above
    if isinstance(body.get("thinking"), dict) and body["thinking"].get("type") == "enabled":
        body.pop("temperature", None)  # "thinking isn't compatible with temperature"
    return with_breakpoints(body)


def _answer_options(options: AnswerOptions) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if options.tool_choice is not None:
        kind = {"required": "any"}.get(options.tool_choice, options.tool_choice)
        out["tool_choice"] = {"type": kind, **({"name": options.tool_name} if kind == "tool" else {})}
    if options.parallel_tool_calls is False and out.get("tool_choice", {}).get("type") != "none":
        # Anthropic says it inside tool_choice (absent: "auto"), and only to turn it off
        out["tool_choice"] = {"type": "auto", **out.get("tool_choice", {}),
                              "disable_parallel_tool_use": True}
    if options.schema is not None:  # structured outputs: the answer text is the JSON
        out["output_config"] = {"format": {"type": "json_schema", "schema": options.schema}}
    return out


class AnthropicProvider:
    """Messages on the Anthropic API (or a compatible one); endpoint and key from the call's profile."""

    def stream(
        self, request: Request, ctx: CallContext, cancel: threading.Event
    ) -> Iterator[Delta | ModelResponse]:
        settings = ctx.settings
        url, key = endpoint_of(ctx)
        body = messages_body(request, settings, ctx.purpose)

        def open_stream() -> Any:
            client = CLIENTS.get(KIND, url, key, lambda http: anthropic.Anthropic(
                api_key=key, base_url=url, max_retries=0, http_client=http))
            return client.messages.create(
                model=body["model"],
                messages=body["messages"],
                system=body.get("system", anthropic.NOT_GIVEN),
                max_tokens=body["max_tokens"],
                stream=True,
                timeout=timeout(settings),
                extra_body={k: v for k, v in body.items() if k not in _NAMED},
            )

        reader = EventReader()
        yield from stream_call(
            open_stream, reader.read, Answer(ctx.step_key, KIND), sent=body, cancel=cancel,
            secrets=private(url, key), sdk=ANTHROPIC_ERRORS,
        )


class EventReader:
    """Reads stream events; the answer is complete only at `message_stop`."""

    def __init__(self) -> None:
        self._stop_reason = "end_turn"

    def read(self, event: Any, answer: Answer) -> str | None:
        """Reads one event into the answer; returns the answer text it carried."""
        kind = getattr(event, "type", None)
        if kind == "message_start":
            answer.usage = _usage(getattr(event.message, "usage", None), {})
            answer.model = getattr(event.message, "model", None) or None
        elif kind == "content_block_start":
            return _block_start(event, answer)
        elif kind == "content_block_delta":
            return _block_delta(event, answer)
        elif kind == "message_delta":
            self._stop_reason = getattr(event.delta, "stop_reason", None) or self._stop_reason
            answer.usage = _usage(getattr(event, "usage", None), answer.usage)
        elif kind == "message_stop":
            answer.finish_reason = _FINISH.get(self._stop_reason, self._stop_reason)
        return None


def _block_start(event: Any, answer: Answer) -> str | None:
    block = event.content_block
    if block.type == "tool_use":
        initial = getattr(block, "input", None) or None
        answer.add_call(event.index, call_id=block.id, name=block.name, initial=initial)
    elif block.type == "text" and block.text:
        return answer.add_text(block.text)
    elif block.type == "thinking":  # kept whole, signature included, to be sent back
        answer.start_reasoning(event.index, {"type": "thinking", "thinking": block.thinking or "",
                                             "signature": getattr(block, "signature", None) or ""})
    elif block.type == "redacted_thinking":
        answer.start_reasoning(event.index, {"type": "redacted_thinking", "data": block.data})
    return None  # thinking is not answer text


def _block_delta(event: Any, answer: Answer) -> str | None:
    delta = event.delta
    if delta.type == "text_delta" and delta.text:
        return answer.add_text(delta.text)
    if delta.type == "input_json_delta" and answer.has_call(event.index):
        answer.add_call(event.index, args=delta.partial_json)
    elif delta.type == "thinking_delta":
        answer.extend_reasoning(event.index, "thinking", delta.thinking)
    elif delta.type == "signature_delta":
        answer.extend_reasoning(event.index, "signature", delta.signature)
    return None


def _usage(usage: Any, before: dict[str, Any]) -> dict[str, Any]:
    """Anthropic usage merged into what `before` had: message_delta counts are cumulative."""
    out = dict(before)
    out.setdefault("input_tokens", 0)
    out.setdefault("output_tokens", 0)
    for name in ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                 "cache_read_input_tokens"):
        value = getattr(usage, name, None)
        if value:
            out[name] = value
    return out
