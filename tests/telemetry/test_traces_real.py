"""One trace per turn, through a real API process and real workers, exported over OTLP/HTTP
to a receiver in the test: the request's span, a span per attempt of each step in order,
the GenAI `chat` and `execute_tool` spans, the GenAI metrics, and no copy of a span after
a worker is killed mid-step (inv. 11); a turn that calls a sub-agent is one trace too,
the child's steps under the `invoke_agent` span, a kill in the child's tool included."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentq.client import Client
from agentq.core.subagents import child_conversation_id
from tests.support.api_stack import ApiStack
from tests.support.otlp import OtlpReceiver, Span
from tests.support.processes import FAST_RECOVERY, WorkerProcess, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

LOOKUP = [{"tool_calls": [{"name": "lookup", "args": {"key": "k"}}]}, {"text": "done"}]
SLOW_LOOKUP = [{"tool_calls": [{"name": "slow_lookup", "args": {"key": "k", "seconds": 3}}]},
               {"text": "done"}]


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as started:
        yield started


def traced_stack(tmp_path, pg_url, redis_url, receiver: OtlpReceiver, **env: str) -> ApiStack:
    return ApiStack(tmp_path, pg_url, redis_url, concurrency=4,
                    OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_SERVICE_NAME="agentq-test",
                    OTEL_BSP_SCHEDULE_DELAY="50", OTEL_METRIC_EXPORT_INTERVAL="200", **env)


def slow_tool_stack(tmp_path, pg_url, redis_url, receiver: OtlpReceiver) -> tuple[ApiStack, Path]:
    """A traced stack that takes a dead worker's steps over soon; the file `slow_lookup`
    writes a line to as each run of it starts."""
    tool_log = tmp_path / "tool.log"
    tool_log.touch()
    stack = traced_stack(tmp_path, pg_url, redis_url, receiver, AGENTQ_TEST_TOOL_LOG=str(tool_log),
                         **FAST_RECOVERY)
    return stack, tool_log


def replace_worker(stack: ApiStack, tmp_path) -> None:
    """SIGKILL the stack's worker and start another."""
    stack.worker.kill()
    stack.worker = WorkerProcess(stack.env, tmp_path / "worker2.log", name="sdk2",
                                 concurrency=4).start()


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
    stack, tool_log = slow_tool_stack(tmp_path, pg_url, redis_url, receiver)
    try:
        with Client(stack.url, stack.key) as client:
            conversation = client.create_conversation({"script": SLOW_LOOKUP})
            turn = client.send(conversation.id, "look it up slowly")
            cid = conversation.id
            wait_for(lambda: tool_log.read_text(), what="the tool to start")
            wait_for(lambda: steps_of(receiver, cid), what="the first model step's span")
            replace_worker(stack, tmp_path)
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


def delegate(client: Client, agent: str, child_script: list):
    """A parent turn that asks the tenant's new agent `agent` (`child_script`) once: its
    conversation and its turn."""
    client.create_agent(agent, {"script": child_script})
    conversation = client.create_conversation({"agents": [agent], "script": [
        {"tool_calls": [{"name": agent, "args": {"input": "dig"}}]}, {"text": "dug"}]})
    return conversation, client.send(conversation.id, "delegate it")


def delegated_steps(receiver: OtlpReceiver, cid: str, child: str) -> list[Span]:
    return sorted(steps_of(receiver, cid) + steps_of(receiver, child), key=lambda s: s.start_ns)


def child_of(stack: ApiStack, cid: str) -> str:
    with Client(stack.url, stack.key) as client:
        (call,) = client.tool_calls(cid)
    assert call.child_conversation_id == child_conversation_id(cid, call.tool_call_id)
    return call.child_conversation_id


def one_trace_of_parent_and_child(receiver: OtlpReceiver, cid: str, child: str, agent: str
                                  ) -> list[Span]:
    """The turn's step spans, checked to form one trace: the parent's under the request, the
    child's under the `invoke_agent` span of the parent's start step."""
    found = delegated_steps(receiver, cid, child)
    spans = receiver.snapshot()
    assert len({s.trace_id for s in found}) == 1
    (request,) = [s for s in spans if s.kind == "server" and s.trace_id == found[0].trace_id]
    (invoked,) = [s for s in spans if s.name == f"invoke_agent {agent}"
                  and s.trace_id == request.trace_id]
    assert invoked.attributes["gen_ai.conversation.id"] == child
    (start,) = [s for s in found if s.span_id == invoked.parent_id]
    assert start.attributes["agentq.conversation.id"] == cid
    for span in found:
        mine = span.attributes["agentq.conversation.id"] == cid
        assert span.parent_id == (request.span_id if mine else invoked.span_id), span.name
    assert len({s.attributes["agentq.step.key"] for s in found}) == len(found)  # no step twice
    return found


def kinds(found: list[Span], cid: str) -> list[str]:
    return [s.attributes["agentq.step.kind"] for s in found
            if s.attributes["agentq.conversation.id"] == cid]


def test_a_turn_that_calls_a_sub_agent_is_one_trace_holding_every_step_of_parent_and_child(
    tmp_path, pg_url, redis_url, receiver
):
    stack = traced_stack(tmp_path, pg_url, redis_url, receiver)
    try:
        with Client(stack.url, stack.key) as client:
            conversation, turn = delegate(client, "researcher", LOOKUP)
            turn.wait()
        cid, turn_id = conversation.id, turn.turn_id
        child = child_of(stack, cid)
        wait_for(lambda: len(delegated_steps(receiver, cid, child)) == 7,
                 what="the spans of the parent's four steps and the child's three")
    finally:
        stack.stop()
    found = one_trace_of_parent_and_child(receiver, cid, child, "researcher")
    assert kinds(found, cid) == ["llm", "tool", "child", "llm"]
    assert kinds(found, child) == ["llm", "tool", "llm"]
    assert all(s.attributes["agentq.step.attempt"] == 1 for s in found)
    assert all(s.attributes["agentq.step.outcome"] == "succeeded" for s in found)
    assert {s.attributes["agentq.turn.id"] for s in found if s.attributes["agentq.conversation.id"]
            == cid} == {turn_id}
    assert len(children(receiver, found, "chat ")) == 4


def test_a_worker_killed_in_a_childs_tool_leaves_the_turn_one_trace_with_the_rerun_linked(
    tmp_path, pg_url, redis_url, receiver
):
    stack, tool_log = slow_tool_stack(tmp_path, pg_url, redis_url, receiver)
    try:
        with Client(stack.url, stack.key) as client:
            conversation, turn = delegate(client, "digger", SLOW_LOOKUP)
            cid = conversation.id
            wait_for(lambda: tool_log.read_text(), what="the child's tool to start")
            child = child_of(stack, cid)
            wait_for(lambda: steps_of(receiver, child), what="the child's model step's span")
            replace_worker(stack, tmp_path)
            turn.wait()
        wait_for(lambda: len(delegated_steps(receiver, cid, child)) == 7, timeout_s=60,
                 what="the spans of the parent's four steps and the child's three")
    finally:
        stack.stop()
    assert len(tool_log.read_text().split()) == 2  # the child's tool ran again, same call id
    found = one_trace_of_parent_and_child(receiver, cid, child, "digger")
    assert kinds(found, child) == ["llm", "tool", "llm"]
    (rerun,) = [s for s in found if s.attributes["agentq.conversation.id"] == child
                and s.attributes["agentq.step.kind"] == "tool"]
    assert rerun.attributes["agentq.step.attempt"] == 2
    assert rerun.attributes["agentq.step.outcome"] == "succeeded"
    ((linked_trace, linked_span),) = rerun.links
    assert linked_trace == rerun.trace_id and linked_span not in {s.span_id for s in receiver.snapshot()}
    assert len(children(receiver, found, "chat ")) == 4  # no model asked twice
