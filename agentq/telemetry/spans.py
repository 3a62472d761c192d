"""What agentq's span helpers answer: the interface, and its no-op while tracing is off.

`agentq.telemetry.otel` implements it on the OpenTelemetry SDK; `agentq.telemetry.tracing`
picks one per process.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from agentq.core.request import Request


class NoSpan:
    """A span that records nothing: every helper's answer while tracing is off."""

    def __enter__(self) -> NoSpan:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        return None

    def outcome(self, outcome: str) -> None:
        """The step's end: succeeded, lost (its commit found it no longer its own), …"""

    def answered(self, *, model: str | None, finish_reason: str | None, usage: Mapping[str, Any],
                 text: str = "", calls: Sequence[Any] = ()) -> None:
        """The model's answer, on a `chat` span."""

    def failed(self, error_type: str) -> None:
        """The call or tool failed with `error_type`."""


NO_SPAN = NoSpan()


class Tracing:
    """Tracing switched off: the spans are `NO_SPAN`, no context is carried."""

    enabled = False

    def reserve(self, traceparent: str | None) -> str | None:
        """The ids a step's next span will have ("<trace id>-<span id>"), so its claim can
        record them and a later attempt link to it; None when off."""
        return None

    def step(self, kind: str, attributes: dict[str, Any], *, traceparent: str | None,
             reserved: str | None = None, replaces: str | None = None) -> NoSpan:
        """The span of one attempt of a step, current while it runs, in the turn's trace
        (`traceparent`); linked to the attempt it `replaces` (its reserved ids)."""
        return NO_SPAN

    def chat(self, attributes: dict[str, Any], request: Request) -> NoSpan:
        """A `chat {model}` span of one model call (GenAI conventions)."""
        return NO_SPAN

    def tool(self, attributes: dict[str, Any]) -> NoSpan:
        """An `execute_tool {name}` span of one tool call (GenAI conventions)."""
        return NO_SPAN

    def agent(self, attributes: dict[str, Any]) -> NoSpan:
        """An `invoke_agent {name}` span, current while entered: the start of a sub-agent's
        child conversation, whose steps join the trace under it (GenAI conventions)."""
        return NO_SPAN

    def traceparent(self) -> str | None:
        """The W3C traceparent of the current span, to keep with a turn; None when off."""
        return None

    def instrument_flask(self, app: Any) -> None:
        """Give a Flask app its request spans (the Flask instrumentation)."""

    def flush(self) -> None:
        """Export what is buffered, before the process exits."""
