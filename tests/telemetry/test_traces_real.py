"""One trace per turn, through a real API process and real workers, exported over OTLP/HTTP
to a receiver in the test: the request's span, a span per attempt of each step in order,
the GenAI `chat` and `execute_tool` spans, the GenAI metrics, and no copy of a span after
a worker is killed mid-step (inv. 11)."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentq.client import Client
from tests.support.api_stack import ApiStack
from tests.support.otlp import OtlpReceiver, Span
from tests.support.processes import FAST_RECOVERY, WorkerProcess, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

LOOKUP = [{"tool_calls": [{"name": "lookup", "args": {"key": "k"}}]}, {"text": "done"}]


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as started:
        yield started


def traced_stack(tmp_path, pg_url, redis_url, receiver: OtlpReceiver, **env: str) -> ApiStack:
    return ApiStack(tmp_path, pg_url, redis_url, concurrency=4,
                    OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_SERVICE_NAME="agentq-test",
                    OTEL_BSP_SCHEDULE_DELAY="50", OTEL_METRIC_EXPORT_INTERVAL="200", **env)


def steps_of(receiver: OtlpReceiver, cid: str) -> list[Span]:
    found = [s for s in receiver.snapshot()
             if s.name.startswith("step ") and s.attributes.get("agentq.conversation.id") == cid]
    return sorted(found, key=lambda s: s.start_ns)


def children(receiver: OtlpReceiver, parents: list[Span], prefix: str) -> list[Span]:
    ids = {p.span_id for p in parents}
    found = [s for s in receiver.snapshot() if s.parent_id in ids and s.name.startswith(prefix)]
    return sorted(found, key=lambda s: s.start_ns)


def test_a_turn_with_a_tool_is_one_trace_from_the_api_request_through_each_step(
    tmp_path, pg_url, redis_url, receiver
):
    stack = traced_stack(tmp_path, pg_url, redis_url, receiver)
    try:
        with Client(stack.url, stack.key) as client:
            conversation = client.create_conversation({"script": LOOKUP})
            turn = client.send(conversation.id, "look it up")
            result = turn.wait()
            (call_id,) = [e.content["tool_call_id"] for e in result.events if e.type == "tool_call"]
        cid = conversation.id
        wait_for(lambda: len(steps_of(receiver, cid)) == 3
                 and len(children(receiver, steps_of(receiver, cid), "chat ")) == 2,
                 what="the spans of the turn's three steps")
        wait_for(lambda: "gen_ai.client.token.usage" in receiver.metrics, what="the GenAI metrics")
    finally:
        stack.stop()
    steps = steps_of(receiver, cid)
    (request,) = [s for s in receiver.snapshot() if s.kind == "server" and s.span_id == steps[0].parent_id]
    assert "/messages" in request.name and request.attributes.get("http.request.method", "POST") == "POST"
    assert {s.trace_id for s in steps} == {request.trace_id}
    assert all(s.parent_id == request.span_id for s in steps)
    assert [s.attributes["agentq.step.kind"] for s in steps] == ["llm", "tool", "llm"]
    for span in steps:
        assert span.attributes["agentq.turn.id"] == turn.turn_id
        assert span.attributes["agentq.tenant"] == "sdk"
        assert span.attributes["agentq.step.attempt"] == 1
        assert span.attributes["agentq.step.outcome"] == "succeeded" and span.status == "ok"
        assert len(span.attributes["agentq.step.key"]) == 64
    assert steps[0].attributes["agentq.round.id"] != steps[2].attributes["agentq.round.id"]
    chats = children(receiver, steps, "chat ")
    assert [c.parent_id for c in chats] == [steps[0].span_id, steps[2].span_id]
    for chat, finish in zip(chats, ["tool_calls", "stop"], strict=True):
        attrs = chat.attributes
        assert chat.kind == "client" and chat.name == f"chat {attrs['gen_ai.request.model']}"
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.provider.name"] == "agentq.scripted"
        assert attrs["gen_ai.response.model"] == attrs["gen_ai.request.model"]
        assert attrs["gen_ai.usage.input_tokens"] > 0 and attrs["gen_ai.usage.output_tokens"] > 0
        assert attrs["gen_ai.response.finish_reasons"] == (finish,)
        assert "gen_ai.input.messages" not in attrs and "gen_ai.output.messages" not in attrs
    (tool,) = children(receiver, [steps[1]], "execute_tool ")
    assert tool.name == "execute_tool lookup"
    assert tool.attributes["gen_ai.tool.call.id"] == call_id
    assert tool.attributes["gen_ai.tool.name"] == "lookup"
    assert not [s for s in receiver.snapshot() if s.kind == "server" and "readyz" in s.name]
    usage = receiver.metrics["gen_ai.client.token.usage"]
    assert {p["attributes"]["gen_ai.token.type"] for p in usage} == {"input", "output"}
    assert wait_for(lambda: receiver.metrics.get("gen_ai.client.operation.duration"),
                    what="the duration metric")


def test_a_worker_killed_mid_tool_leaves_no_copy_and_the_rerun_is_attempt_two_linked_to_it(
    tmp_path, pg_url, redis_url, receiver
):
    tool_log = tmp_path / "tool.log"
    tool_log.touch()
    script = [{"tool_calls": [{"name": "slow_lookup", "args": {"key": "k", "seconds": 3}}]},
              {"text": "done"}]
    stack = traced_stack(tmp_path, pg_url, redis_url, receiver, AGENTQ_TEST_TOOL_LOG=str(tool_log),
                         **FAST_RECOVERY)
    try:
        with Client(stack.url, stack.key) as client:
            conversation = client.create_conversation({"script": script})
            turn = client.send(conversation.id, "look it up slowly")
            cid = conversation.id
            wait_for(lambda: tool_log.read_text(), what="the tool to start")
            wait_for(lambda: steps_of(receiver, cid), what="the first model step's span")
            stack.worker.kill()
            stack.worker = WorkerProcess(stack.env, tmp_path / "worker2.log", name="sdk2",
                                         concurrency=4).start()
            turn.wait()
        wait_for(lambda: len(steps_of(receiver, cid)) == 3, timeout_s=60,
                 what="the spans of the turn's three steps")
    finally:
        stack.stop()
    assert len(tool_log.read_text().split()) == 2  # the tool ran again, under the same call id
    steps = steps_of(receiver, cid)
    assert [s.attributes["agentq.step.kind"] for s in steps] == ["llm", "tool", "llm"]
    assert len({s.attributes["agentq.step.key"] for s in steps}) == 3  # no step twice
    assert len({s.trace_id for s in steps}) == 1
    rerun = steps[1]
    assert rerun.attributes["agentq.step.attempt"] == 2
    assert rerun.attributes["agentq.step.outcome"] == "succeeded"
    ((linked_trace, linked_span),) = rerun.links  # the attempt it took over from, never exported
    assert linked_trace == rerun.trace_id and linked_span != rerun.span_id
    assert linked_span not in {s.span_id for s in receiver.snapshot()}
    assert len(children(receiver, steps, "execute_tool ")) == 1
    assert len(children(receiver, steps, "chat ")) == 2  # the model was not asked again
