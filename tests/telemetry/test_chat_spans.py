"""The `chat {model}` span of a call through each real adapter (its official SDK) to its
strict emulator on loopback: the GenAI attributes as the API answered them."""
from __future__ import annotations

import importlib
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentq.telemetry.otel import OtelTracing, ReservedIds
from tests.support.emulators import Reply
from tests.support.emulators.kit import MODEL, Kit, kit_fixtures

served, kit = kit_fixtures("openai", "anthropic", "openai_responses")
PROVIDER_NAMES = {"openai": "openai", "openai_responses": "openai", "anthropic": "anthropic"}


@pytest.fixture
def exporter(monkeypatch) -> Iterator[InMemorySpanExporter]:
    module = importlib.import_module("agentq.telemetry.tracing")
    found = InMemorySpanExporter()
    provider = TracerProvider(id_generator=ReservedIds())
    provider.add_span_processor(SimpleSpanProcessor(found))
    monkeypatch.setattr(module, "_current", [OtelTracing(provider, None)])
    yield found
    provider.shutdown()


def test_a_model_call_is_a_chat_span_with_the_genai_attributes(kit: Kit, exporter) -> None:
    kit.emulator.then(Reply(text="Sunny."))
    answer = kit.answer()
    (span,) = exporter.get_finished_spans()
    attrs = span.attributes
    endpoint = urlsplit(kit.emulator.url)
    assert span.name == f"chat {MODEL}"
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == PROVIDER_NAMES[kit.name]
    assert attrs["gen_ai.request.model"] == MODEL
    assert attrs["gen_ai.response.model"] == answer.model and answer.model
    assert attrs["server.address"] == endpoint.hostname and attrs["server.port"] == endpoint.port
    assert attrs["gen_ai.usage.output_tokens"] == answer.usage["output_tokens"] > 0
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)
