"""`Tracing` on the OpenTelemetry SDK: spans and GenAI metrics exported as OTEL_* says.

Imported only when the environment turns tracing on (`agentq.telemetry.tracing`), so a
process without it never loads the SDK. The exporters, endpoint, service name and sampler
are the standard variables' (OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_ENDPOINT and
_PROTOCOL, OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER…), read by the SDK itself where it can.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from importlib.metadata import entry_points
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from agentq.core.request import Request
from agentq.telemetry import attributes as a
from agentq.telemetry.spans import NoSpan, Tracing

log = logging.getLogger(__name__)

# The bucket boundaries the GenAI conventions advise for their two histograms.
DURATION_BUCKETS_S = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                      40.96, 81.92)
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                 16777216, 67108864)

# Probes and scrapes make no span unless OTEL_PYTHON_FLASK_EXCLUDED_URLS says otherwise.
UNTRACED_URLS = "/healthz,/readyz,/metrics"

# The ids the next span started in this context takes (a step's, reserved at its claim).
_CHOSEN: ContextVar[tuple[int, int] | None] = ContextVar("agentq_chosen_span_ids", default=None)


class ReservedIds(RandomIdGenerator):
    """Random ids, except for a span whose ids its step reserved before the claim."""

    def generate_span_id(self) -> int:
        chosen = _CHOSEN.get()
        return super().generate_span_id() if chosen is None else chosen[1]

    def generate_trace_id(self) -> int:
        chosen = _CHOSEN.get()
        return super().generate_trace_id() if chosen is None else chosen[0]


def _ids(text: str) -> tuple[int, int] | None:
    """"<trace id>-<span id>" in hex, as `reserve` writes it; None if it is not that."""
    trace_hex, _, span_hex = text.partition("-")
    try:
        trace_id, span_id = int(trace_hex, 16), int(span_hex, 16)
    except ValueError:
        return None
    return (trace_id, span_id) if trace_id and span_id else None


class _Span(NoSpan):
    """An SDK span behind agentq's span helpers; current while entered when `current`."""

    def __init__(self, span: trace.Span, *, current: bool = True) -> None:
        self.span = span
        self._use = trace.use_span(span, end_on_exit=True) if current else None

    def __enter__(self) -> _Span:
        if self._use is not None:
            self._use.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is not None:
            self.failed(_error_type(exc))
        if self._use is not None:
            self._use.__exit__(kind, exc, tb)
        else:
            self.span.end()

    def outcome(self, outcome: str) -> None:
        self.span.set_attribute(a.OUTCOME, outcome)
        if outcome == "succeeded":
            self.span.set_status(Status(StatusCode.OK))

    def failed(self, error_type: str) -> None:
        self.span.set_attribute(a.ERROR_TYPE, error_type)
        self.span.set_status(Status(StatusCode.ERROR, error_type))


class _ChatSpan(_Span):
    """A model call: its span (not made current: the provider's stream is a generator) and
    the two GenAI histograms, recorded as it ends."""

    def __init__(self, span: trace.Span, tracing: OtelTracing, attributes: dict[str, Any]) -> None:
        super().__init__(span, current=False)
        self._tracing = tracing
        self._metric_attributes = {name: attributes[name] for name in (
            a.OPERATION, a.PROVIDER, a.REQUEST_MODEL, a.SERVER_ADDRESS, a.SERVER_PORT)
            if name in attributes}
        self._usage: Mapping[str, Any] = {}
        self._started = time.perf_counter()

    def answered(self, *, model: str | None, finish_reason: str | None, usage: Mapping[str, Any],
                 text: str = "", calls: Sequence[Any] = ()) -> None:
        found = a.response_attributes(model=model, finish_reason=finish_reason, usage=usage)
        self.span.set_attributes(found)
        if model:
            self._metric_attributes[a.RESPONSE_MODEL] = model
        self._usage = usage
        if self._tracing.capture_content:
            self.span.set_attribute(a.OUTPUT_MESSAGES, a.output_messages(text, calls, finish_reason))

    def failed(self, error_type: str) -> None:
        super().failed(error_type)
        self._metric_attributes[a.ERROR_TYPE] = error_type

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        super().__exit__(kind, exc, tb)
        self._tracing.record_call(time.perf_counter() - self._started, self._metric_attributes,
                                  self._usage)


class OtelTracing(Tracing):
    """Spans through one TracerProvider of this process; GenAI metrics through its MeterProvider."""

    enabled = True

    def __init__(self, provider: TracerProvider, meters: MeterProvider | None,
                 *, capture_content: bool = False, excluded_urls: str | None = None) -> None:
        """`excluded_urls`: requests that make no span (None: OTEL_PYTHON_FLASK_EXCLUDED_URLS)."""
        self.provider = provider
        self._excluded_urls = excluded_urls
        self.meters = meters
        self.capture_content = capture_content
        self._tracer = provider.get_tracer("agentq")
        self._propagator = TraceContextTextMapPropagator()
        self._tokens = self._duration = None
        if meters is not None:
            meter = meters.get_meter("agentq")
            self._tokens = meter.create_histogram(
                a.TOKEN_USAGE_METRIC, unit="{token}", description="Tokens used by model calls",
                explicit_bucket_boundaries_advisory=list(TOKEN_BUCKETS))
            self._duration = meter.create_histogram(
                a.DURATION_METRIC, unit="s", description="Duration of model calls",
                explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS_S))

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, metrics: bool) -> OtelTracing:
        resource = Resource.create(_default_service(env))
        # The sampler is OTEL_TRACES_SAMPLER's (and _ARG's), read by the SDK.
        provider = TracerProvider(resource=resource, id_generator=ReservedIds())
        for exporter in _exporters("traces", env):
            provider.add_span_processor(BatchSpanProcessor(exporter))
        meters = None
        if metrics:
            readers = [PeriodicExportingMetricReader(exporter)
                       for exporter in _exporters("metrics", env)]
            meters = MeterProvider(resource=resource, metric_readers=readers)
        log.info("tracing on: spans exported as OTEL_* says%s", ", GenAI metrics too" if meters else "")
        excluded = None if env.get("OTEL_PYTHON_FLASK_EXCLUDED_URLS") else UNTRACED_URLS
        return cls(provider, meters, capture_content=a.captures_content(env),
                   excluded_urls=excluded)

    def reserve(self, traceparent: str | None) -> str | None:
        parent = self._parent_span(traceparent)
        ids = RandomIdGenerator()
        trace_id = parent.trace_id if parent is not None else ids.generate_trace_id()
        return f"{trace_id:032x}-{ids.generate_span_id():016x}"

    def step(self, kind: str, attributes: dict[str, Any], *, traceparent: str | None,
             reserved: str | None = None, replaces: str | None = None) -> _Span:
        parent = self._parent_span(traceparent)
        context = trace.set_span_in_context(trace.NonRecordingSpan(parent)) if parent else None
        links = []
        if replaces is not None and (replaced := _ids(replaces)) is not None:
            links.append(Link(SpanContext(replaced[0], replaced[1], is_remote=True,
                                          trace_flags=TraceFlags(TraceFlags.SAMPLED))))
        token = _CHOSEN.set(_ids(reserved)) if reserved else None
        try:
            span = self._tracer.start_span(f"step {kind}", context=context, links=links,
                                           attributes=attributes, kind=SpanKind.INTERNAL)
        finally:
            if token is not None:
                _CHOSEN.reset(token)
        return _Span(span)

    def chat(self, attributes: dict[str, Any], request: Request) -> _ChatSpan:
        span = self._tracer.start_span(f"{a.CHAT} {attributes.get(a.REQUEST_MODEL, '')}".strip(),
                                       attributes=attributes, kind=SpanKind.CLIENT)
        if self.capture_content:
            span.set_attribute(a.INPUT_MESSAGES, a.input_messages(request))
        return _ChatSpan(span, self, attributes)

    def tool(self, attributes: dict[str, Any]) -> _Span:
        name = f"{a.EXECUTE_TOOL} {attributes.get(a.TOOL_NAME, '')}".strip()
        return _Span(self._tracer.start_span(name, attributes=attributes, kind=SpanKind.INTERNAL))

    def agent(self, attributes: dict[str, Any]) -> _Span:
        name = f"{a.INVOKE_AGENT} {attributes.get(a.AGENT_NAME, '')}".strip()
        return _Span(self._tracer.start_span(name, attributes=attributes, kind=SpanKind.INTERNAL))

    def traceparent(self) -> str | None:
        if not trace.get_current_span().get_span_context().is_valid:
            return None
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier)
        return carrier.get("traceparent")

    def instrument_flask(self, app: Any) -> None:
        from opentelemetry.instrumentation.flask import FlaskInstrumentor

        FlaskInstrumentor.instrument_app(app, tracer_provider=self.provider,
                                         meter_provider=self.meters,
                                         excluded_urls=self._excluded_urls)

    def flush(self) -> None:
        self.provider.force_flush()
        if self.meters is not None:
            self.meters.force_flush()

    def record_call(self, duration_s: float, attributes: dict[str, Any],
                    usage: Mapping[str, Any]) -> None:
        """The GenAI metrics of one model call (when a meter provider is configured)."""
        if self._duration is None or self._tokens is None:
            return
        self._duration.record(duration_s, attributes)
        for kind, field in (("input", "input_tokens"), ("output", "output_tokens")):
            count = usage.get(field)
            if isinstance(count, int) and not isinstance(count, bool):
                self._tokens.record(count, {**attributes, a.TOKEN_TYPE: kind})

    def _parent_span(self, traceparent: str | None) -> SpanContext | None:
        """The span context a turn's traceparent names, or None if it names none."""
        if not traceparent:
            return None
        found = trace.get_current_span(
            self._propagator.extract({"traceparent": traceparent}, context=otel_context.Context())
        ).get_span_context()
        return found if found.is_valid else None


def _error_type(exc: BaseException) -> str:
    """`error.type`: a provider error's code (`rate_limited`, …), else the exception's class;
    a stream closed before its end is `cancelled`."""
    if isinstance(exc, GeneratorExit):
        return "cancelled"
    code = getattr(exc, "code", None)
    return code if isinstance(code, str) and code else type(exc).__qualname__


def _default_service(env: Mapping[str, str]) -> dict[str, str]:
    """`service.name` agentq, unless the operator named the service."""
    named = env.get("OTEL_SERVICE_NAME", "").strip() or "service.name=" in env.get(
        "OTEL_RESOURCE_ATTRIBUTES", "")
    return {} if named else {"service.name": "agentq"}


def _exporters(signal: str, env: Mapping[str, str]) -> list[Any]:
    """The exporters OTEL_{TRACES,METRICS}_EXPORTER names (default otlp), built from the
    SDK's entry points; `otlp` over OTEL_EXPORTER_OTLP_PROTOCOL (default http/protobuf)."""
    names = [name.strip().lower() for name in
             env.get(f"OTEL_{signal.upper()}_EXPORTER", "otlp").split(",") if name.strip()]
    protocol = (env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL")
                or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip()
    found: list[SpanExporter | MetricExporter] = []
    for name in names:
        if name == "none":
            continue
        if name == "otlp":
            name = "otlp_proto_grpc" if protocol == "grpc" else "otlp_proto_http"
        group = f"opentelemetry_{signal}_exporter"
        matches = list(entry_points(group=group, name=name))
        if not matches:
            log.warning("%s exporter %r is not installed: not exported there", signal, name)
            continue
        found.append(matches[0].load()())
    return found
