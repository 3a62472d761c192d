"""The mapping of agentq's steps and calls onto span attributes (GenAI conventions), and when
the environment turns tracing on: plain values, no processes, no SDK."""
from __future__ import annotations

import json

import pytest

from agentq.core.request import CallRef, Message, Request
from agentq.telemetry import attributes as a
from agentq.telemetry.tracing import wanted


def test_a_step_carries_its_conversation_turn_round_key_tenant_and_attempt():
    found = a.step_attributes(conversation_id="c1", tenant="t1", kind="llm", step_key="k" * 64,
                              attempt=2, turn_id="turn1", round_id="r1")
    assert found == {
        "agentq.conversation.id": "c1", "gen_ai.conversation.id": "c1", "agentq.tenant": "t1",
        "agentq.step.kind": "llm", "agentq.step.key": "k" * 64, "agentq.step.attempt": 2,
        "agentq.turn.id": "turn1", "agentq.round.id": "r1",
    }


def test_a_step_without_a_round_or_turn_leaves_those_attributes_out():
    found = a.step_attributes(conversation_id="c1", tenant="", kind="tool", step_key="k",
                              attempt=1, turn_id=None, round_id=None)
    assert "agentq.round.id" not in found and "agentq.turn.id" not in found


@pytest.mark.parametrize(("kind", "name"), [("openai", "openai"), ("openai_responses", "openai"),
                                            ("anthropic", "anthropic"),
                                            ("scripted", "agentq.scripted")])
def test_provider_kinds_become_the_conventions_provider_names(kind, name):
    assert a.provider_name(kind) == name


def test_a_chat_span_names_the_operation_provider_model_and_server():
    found = a.chat_attributes(kind="anthropic", model="claude-x", conversation_id="c1",
                              base_url="https://api.anthropic.com")
    assert found == {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic",
                     "gen_ai.request.model": "claude-x", "gen_ai.conversation.id": "c1",
                     "server.address": "api.anthropic.com", "server.port": 443}


@pytest.mark.parametrize(("url", "expected"), [
    ("http://127.0.0.1:8080/v1", {"server.address": "127.0.0.1", "server.port": 8080}),
    ("http://llm.internal/v1", {"server.address": "llm.internal", "server.port": 80}),
    (None, {}),
    ("not a url", {}),
])
def test_the_server_is_the_endpoints_host_and_port(url, expected):
    assert a.server_attributes(url) == expected


def test_usage_maps_onto_the_conventions_token_counts_and_skips_what_is_not_a_count():
    usage = {"input_tokens": 12, "output_tokens": 3, "cache_read_input_tokens": 8,
             "reasoning_tokens": True, "total_tokens": 15}
    assert a.usage_attributes(usage) == {"gen_ai.usage.input_tokens": 12,
                                         "gen_ai.usage.output_tokens": 3,
                                         "gen_ai.usage.cache_read.input_tokens": 8}


def test_the_answer_gives_the_response_model_and_finish_reasons():
    found = a.response_attributes(model="gpt-x-2025", finish_reason="tool_calls",
                                  usage={"input_tokens": 1, "output_tokens": 2})
    assert found["gen_ai.response.model"] == "gpt-x-2025"
    assert found["gen_ai.response.finish_reasons"] == ("tool_calls",)


def test_a_tool_span_names_the_tool_and_its_call():
    assert a.tool_attributes(name="lookup", call_id="call_1", conversation_id="c1") == {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.id": "call_1", "gen_ai.tool.type": "function",
        "gen_ai.conversation.id": "c1"}


def test_an_agent_span_names_the_agent_its_version_and_the_child_conversation():
    assert a.agent_attributes(name="researcher", version=3, conversation_id="child") == {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher",
        "gen_ai.agent.version": "3", "gen_ai.conversation.id": "child"}
    assert "gen_ai.agent.version" not in a.agent_attributes(name="r", version=None,
                                                             conversation_id="c")


@pytest.mark.parametrize(("value", "on"), [("true", True), ("TRUE", True), ("1", True),
                                           ("false", False), ("", False)])
def test_message_content_is_captured_only_when_the_operator_says_so(value, on):
    assert a.captures_content({a.CAPTURE_CONTENT_ENV: value}) is on
    assert a.captures_content({}) is False


def test_captured_messages_follow_the_conventions_shape():
    call = CallRef("call_1", "lookup", {"key": "k"})
    request = Request(system="You help.", messages=(
        Message("user", "hi"), Message("assistant", "", tool_calls=(call,)),
        Message("tool", "value", tool_call_id="call_1")))
    sent = json.loads(a.input_messages(request))
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    assert sent[2]["parts"] == [{"type": "tool_call", "id": "call_1", "name": "lookup",
                                 "arguments": {"key": "k"}}]
    assert sent[3]["parts"] == [{"type": "tool_call_response", "id": "call_1", "response": "value"}]
    answer = json.loads(a.output_messages("done", (), "stop"))
    assert answer == [{"role": "assistant", "parts": [{"type": "text", "content": "done"}],
                       "finish_reason": "stop"}]


@pytest.mark.parametrize(("env", "expected"), [
    ({}, (False, False)),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, (True, True)),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, (True, False)),
    ({"OTEL_TRACES_EXPORTER": "console"}, (True, False)),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "otlp"}, (True, True)),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_METRICS_EXPORTER": "none"}, (True, False)),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, (False, True)),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, (False, False)),
])
def test_the_otel_environment_decides_what_is_exported(env, expected):
    assert wanted(env) == expected
