"""agentq's span helpers on the OpenTelemetry SDK, exported in memory: a step's span takes the
ids its claim recorded and joins its turn's trace, a takeover links to the attempt it
replaced, a lost commit is no success; and with tracing off no process loads the SDK."""
from __future__ import annotations

import json
import subprocess
import sys

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agentq.core.request import Message, Request
from agentq.telemetry import attributes as a
from agentq.telemetry.otel import OtelTracing, ReservedIds
from tests.support.processes import ROOT

TURN = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
REQUEST = Request(system="", messages=(Message("user", "hi"),), model="m1")


def traced(*, content: bool = False) -> tuple[OtelTracing, InMemorySpanExporter, InMemoryMetricReader]:
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    provider = TracerProvider(id_generator=ReservedIds())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return (OtelTracing(provider, MeterProvider(metric_readers=[reader]), capture_content=content),
            exporter, reader)


def test_a_steps_span_joins_its_turns_trace_with_the_ids_its_claim_reserved():
    tracing, exporter, _ = traced()
    reserved = tracing.reserve(TURN)
    with tracing.step("llm", {"agentq.step.attempt": 1}, traceparent=TURN, reserved=reserved) as span:
        span.outcome("succeeded")
    (done,) = exporter.get_finished_spans()
    assert f"{done.context.trace_id:032x}-{done.context.span_id:016x}" == reserved
    assert f"{done.context.trace_id:032x}" == TURN.split("-")[1]
    assert f"{done.parent.span_id:016x}" == TURN.split("-")[2]
    assert done.name == "step llm" and done.status.status_code is StatusCode.OK


def test_a_takeover_links_to_the_attempt_it_replaced_and_is_a_new_span():
    tracing, exporter, _ = traced()
    first = tracing.reserve(TURN)
    second = tracing.reserve(TURN)
    with tracing.step("tool", {"agentq.step.attempt": 2}, traceparent=TURN, reserved=second,
                      replaces=first) as span:
        span.outcome("succeeded")
    (done,) = exporter.get_finished_spans()
    assert first != second
    (link,) = done.links
    assert f"{link.context.trace_id:032x}-{link.context.span_id:016x}" == first


def test_a_commit_that_lost_its_race_ends_its_span_as_lost_not_as_a_success():
    tracing, exporter, _ = traced()
    with tracing.step("llm", {}, traceparent=TURN) as span:
        span.outcome("lost")
    (done,) = exporter.get_finished_spans()
    assert done.attributes[a.OUTCOME] == "lost"
    assert done.status.status_code is StatusCode.UNSET


def test_a_step_that_raises_ends_its_span_as_an_error():
    tracing, exporter, _ = traced()
    try:
        with tracing.step("llm", {}, traceparent=None):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    (done,) = exporter.get_finished_spans()
    assert done.status.status_code is StatusCode.ERROR
    assert done.attributes[a.ERROR_TYPE] == "RuntimeError"


def test_the_traceparent_kept_with_a_turn_is_the_current_spans():
    tracing, _, _ = traced()
    assert tracing.traceparent() is None
    with tracing.step("llm", {}, traceparent=TURN) as span:
        kept = tracing.traceparent()
    assert kept is not None and kept.split("-")[1] == TURN.split("-")[1]
    assert kept.split("-")[2] == f"{span.span.get_span_context().span_id:016x}"


def test_a_chat_span_is_the_step_spans_child_and_records_the_genai_metrics():
    tracing, exporter, reader = traced()
    attributes = a.chat_attributes(kind="openai", model="m1", base_url="https://api.example.com/v1",
                                   conversation_id="c1")
    with tracing.step("llm", {}, traceparent=TURN), tracing.chat(attributes, REQUEST) as chat:
        chat.answered(model="m1-2025", finish_reason="stop",
                      usage={"input_tokens": 10, "output_tokens": 4}, text="hello")
    chat_span, step_span = exporter.get_finished_spans()
    assert chat_span.name == "chat m1" and chat_span.parent.span_id == step_span.context.span_id
    assert chat_span.attributes["gen_ai.response.model"] == "m1-2025"
    assert chat_span.attributes["gen_ai.usage.output_tokens"] == 4
    assert a.INPUT_MESSAGES not in chat_span.attributes  # content stays out by default
    metrics = {m.name: m for rm in reader.get_metrics_data().resource_metrics
               for sm in rm.scope_metrics for m in sm.metrics}
    points = metrics[a.TOKEN_USAGE_METRIC].data.data_points
    tokens = {p.attributes["gen_ai.token.type"]: p.sum for p in points}
    assert tokens == {"input": 10, "output": 4}
    (duration,) = metrics[a.DURATION_METRIC].data.data_points
    assert duration.count == 1 and duration.attributes["gen_ai.response.model"] == "m1-2025"
    assert duration.attributes["server.address"] == "api.example.com"


def test_message_content_is_on_the_chat_span_when_the_operator_turns_it_on():
    tracing, exporter, _ = traced(content=True)
    with tracing.chat(a.chat_attributes(kind="openai", model="m1", base_url=None,
                                        conversation_id="c1"), REQUEST) as chat:
        chat.answered(model=None, finish_reason="stop", usage={}, text="hello")
    (done,) = exporter.get_finished_spans()
    assert json.loads(done.attributes[a.INPUT_MESSAGES])[0]["parts"][0]["content"] == "hi"
    assert json.loads(done.attributes[a.OUTPUT_MESSAGES])[0]["parts"][0]["content"] == "hello"


def test_without_otel_settings_no_process_builds_a_tracer_or_loads_the_exporters():
    """agentq's side of "costs nothing": its SDK module, the exporters and the instrumentation
    stay unloaded. (redis-py loads parts of opentelemetry on its own when it is installed.)"""
    program = (
        "import sys, agentq.web.app, agentq.worker.tasks, agentq.runtime.runtime\n"
        "from agentq.telemetry import tracing\n"
        "assert not tracing().enabled\n"
        "print(sorted(m for m in sys.modules if m.startswith(('agentq.telemetry.otel',\n"
        "      'opentelemetry.sdk.trace', 'opentelemetry.exporter', 'opentelemetry.instrumentation'))))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", program], env=env, cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_failed_model_call_names_the_providers_error_code():
    from agentq.providers.errors import ProviderError

    tracing, exporter, reader = traced()
    try:
        with tracing.chat(a.chat_attributes(kind="openai", model="m1", base_url=None,
                                            conversation_id="c1"), REQUEST):
            raise ProviderError("slow down", code="rate_limited", transient=True)
    except ProviderError:
        pass
    (done,) = exporter.get_finished_spans()
    assert done.attributes[a.ERROR_TYPE] == "rate_limited"
    assert done.status.status_code is StatusCode.ERROR
    metrics = {m.name: m for rm in reader.get_metrics_data().resource_metrics
               for sm in rm.scope_metrics for m in sm.metrics}
    (duration,) = metrics[a.DURATION_METRIC].data.data_points
    assert duration.attributes[a.ERROR_TYPE] == "rate_limited"
