"""The OpenAI Responses adapter: `client.responses.create(stream=True)` through the official SDK.

Stateless: every request sends `store: false`, so nothing lives on OpenAI's side between
rounds, and a reasoning model is asked for `reasoning.encrypted_content`. Its reasoning
items are kept in the answer exactly as the completed `response.output_item.done` event
carried them (the `added` event's copy may be incomplete) and go back in the next rounds,
before the calls they preceded (`agentq.core.responses_wire`). HTTP failures take the
openai SDK's classification (`openai_errors`); failures reported inside the stream (`error`,
`response.failed`) are classified here, by their code.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import openai

from agentq.core.request import Request
from agentq.core.responses_wire import PROVIDER, to_responses
from agentq.core.settings import Settings
from agentq.providers.answer import Answer
from agentq.providers.base import CallContext, Delta, ModelResponse
from agentq.providers.connection import endpoint_of, private, timeout
from agentq.providers.errors import ContextTooLong, ProviderError
from agentq.providers.openai_chat import KIND as CHAT_KIND
from agentq.providers.openai_chat import reasoning_model
from agentq.providers.openai_errors import OPENAI_ERRORS
from agentq.providers.options import AnswerOptions, answer_options
from agentq.providers.pool import CLIENTS
from agentq.providers.streaming import stream_call

# Sent as the SDK's named arguments; everything else goes through `extra_body` untouched.
_NAMED = ("model", "input", "stream")
ENCRYPTED_REASONING = "reasoning.encrypted_content"
# Codes of failures reported inside the stream: worth another try, or a context too long.
_TRANSIENT_CODES = frozenset({"server_error", "rate_limit_exceeded", "internal_error",
                              "service_unavailable", "overloaded_error", "timeout"})
_CONTEXT_CODES = frozenset({"context_length_exceeded"})
_INCOMPLETE: dict[Any, str] = {"max_output_tokens": "length", "content_filter": "content_filter"}


def reasons(settings: Settings, model: str) -> bool:
    """Whether the model reasons: the conversation set reasoning options, or it is an
    o-series or gpt-5 model (`openai.reasoning_model`)."""
    asked = settings.reasoning is not None or settings.reasoning_effort is not None
    return asked or reasoning_model(model)


def _reasoning(settings: Settings) -> dict[str, Any] | None:
    """`reasoning` {effort, summary}; `reasoning_effort` (the chat completions setting) counts too."""
    chosen = settings.reasoning.model_dump(exclude_none=True) if settings.reasoning else {}
    if settings.reasoning_effort is not None:
        chosen.setdefault("effort", settings.reasoning_effort)
    return chosen or None


def _answer_options(options: AnswerOptions) -> dict[str, Any]:
    """tool_choice and the answer's JSON schema in the Responses API's words."""
    out: dict[str, Any] = {}
    if options.tool_choice == "tool":
        out["tool_choice"] = {"type": "function", "name": options.tool_name}
    elif options.tool_choice is not None:
        out["tool_choice"] = options.tool_choice
    if options.parallel_tool_calls is not None:
        out["parallel_tool_calls"] = options.parallel_tool_calls
    if options.schema is not None:
        out["text"] = {"format": {"type": "json_schema", "name": options.schema_name,
                                  "schema": options.schema, "strict": options.strict}}
    return out


def responses_body(request: Request, settings: Settings, purpose: str = "answer") -> dict[str, Any]:
    """The whole JSON body of a streaming, stateless Responses request for this request."""
    body = to_responses(request)
    body["model"] = body["model"] or settings.model
    body["stream"] = True
    body["store"] = False
    reasoning = reasons(settings, body["model"] or "")
    if reasoning:
        body["include"] = [ENCRYPTED_REASONING]
        if _reasoning(settings):
            body["reasoning"] = _reasoning(settings)
    elif settings.temperature is not None:  # reasoning models refuse it
        body["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        body["max_output_tokens"] = settings.max_tokens
    body.update(_answer_options(answer_options(request, settings, purpose)))
    for name, value in (settings.extra_body or {}).items():
        body.setdefault(name, value)  # extra_body adds options; it never replaces the above
    if reasoning:  # "Unsupported parameter" on reasoning models, whoever set them
        body.pop("temperature", None)
        body.pop("top_p", None)
    return body


class OpenAIResponsesProvider:
    """The Responses API on an OpenAI-compatible endpoint; endpoint and key from the call's profile."""

    def stream(
        self, request: Request, ctx: CallContext, cancel: threading.Event
    ) -> Iterator[Delta | ModelResponse]:
        settings = ctx.settings
        url, key = endpoint_of(ctx)
        body = responses_body(request, settings, ctx.purpose)

        def open_stream() -> Any:
            # The chat completions adapter's pooled client: one per endpoint and key. The
            # SDK reads a Responses stream to its end (it has no [DONE]), so the connection
            # goes back to the pool.
            client = CLIENTS.get(CHAT_KIND, url, key, lambda http: openai.OpenAI(
                api_key=key, base_url=url, max_retries=0, http_client=http))
            return client.responses.create(
                model=body["model"],
                input=body["input"],
                stream=True,
                timeout=timeout(settings),
                extra_body={k: v for k, v in body.items() if k not in _NAMED},
            )

        reader = EventReader()
        yield from stream_call(
            open_stream, reader.read, Answer(ctx.step_key, PROVIDER), sent=body, cancel=cancel,
            secrets=private(url, key), sdk=OPENAI_ERRORS,
        )


class EventReader:
    """Reads Responses stream events into an answer; calls are keyed by their output index."""

    def __init__(self) -> None:
        self._streamed: set[int] = set()  # output indexes whose arguments came in deltas

    def read(self, event: Any, answer: Answer) -> str | None:
        kind = getattr(event, "type", None)
        if kind in ("response.output_text.delta", "response.refusal.delta") and event.delta:
            return answer.add_text(event.delta)
        if kind == "response.output_item.added" and event.item.type == "function_call":
            item = event.item
            answer.add_call(event.output_index, call_id=item.call_id, name=item.name)
        elif kind == "response.function_call_arguments.delta" and answer.has_call(event.output_index):
            self._streamed.add(event.output_index)
            answer.add_call(event.output_index, args=event.delta)
        elif kind == "response.output_item.done":
            self._item_done(event, answer)
        elif kind in ("response.completed", "response.incomplete"):
            self._finish(event.response, answer)
        elif kind == "response.failed":
            error = getattr(event.response, "error", None)
            raise stream_error(getattr(error, "code", None), getattr(error, "message", None))
        elif kind == "error":
            raise stream_error(event.code, event.message)
        return None

    def _item_done(self, event: Any, answer: Answer) -> None:
        item = event.item
        if item.type == "reasoning":  # its place in the output, so it goes back there
            answer.start_reasoning(event.output_index, item.to_dict(mode="json"))
        elif item.type == "function_call":
            answer.add_call(event.output_index, call_id=item.call_id, name=item.name)
            if event.output_index not in self._streamed:
                answer.add_call(event.output_index, args=item.arguments)

    def _finish(self, response: Any, answer: Answer) -> None:
        answer.usage = usage_of(getattr(response, "usage", None))
        answer.model = getattr(response, "model", None) or None
        details = getattr(response, "incomplete_details", None)
        reason = getattr(details, "reason", None)
        if response.status == "incomplete":
            answer.finish_reason = _INCOMPLETE.get(reason, reason or "length")
        else:
            answer.finish_reason = "tool_calls" if answer.has_calls() else "stop"


def stream_error(code: str | None, message: str | None) -> ProviderError:
    """A failure the server reported inside a 200 stream, transient or not by its code."""
    text = f"the response failed: {message or 'no message'} ({code or 'no code'})"
    if code in _CONTEXT_CODES:
        return ContextTooLong(text, status=200)
    return ProviderError(text, transient=code in _TRANSIENT_CODES, status=200,
                         code=code or "response_failed")


def usage_of(usage: Any) -> dict[str, Any]:
    """Responses usage in the neutral names, with cached input and reasoning output tokens."""
    out = {
        "input_tokens": getattr(usage, "input_tokens", None) or 0,
        "output_tokens": getattr(usage, "output_tokens", None) or 0,
    }
    cached = getattr(getattr(usage, "input_tokens_details", None), "cached_tokens", None)
    reasoning = getattr(getattr(usage, "output_tokens_details", None), "reasoning_tokens", None)
    if cached:
        out["cache_read_input_tokens"] = cached
    if reasoning:
        out["reasoning_tokens"] = reasoning
    return out
