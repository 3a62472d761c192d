"""The spans the runtime makes, on a store with no broker: every step of a turn joins the
trace of the request that posted its message (an inbox message too), an attempt that
takes over links to the one it replaced, a commit that lost its race is no success, and a
sub-agent's child conversation runs in its parent turn's trace."""
from __future__ import annotations

import importlib
from collections.abc import Iterator
from datetime import timedelta

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentq.commands import Commands
from agentq.config import Config
from agentq.core.agents import AgentDefinition
from agentq.core.scope import Scope
from agentq.core.settings import Settings
from agentq.core.subagents import child_conversation_id
from agentq.runtime import Runtime
from agentq.runtime.lifecycle import SPAN_MARK
from agentq.runtime.tool_step import ToolStep
from agentq.telemetry import tracing as process_tracing
from agentq.telemetry.otel import OtelTracing, ReservedIds
from agentq.tools import Registry
from tests.support.clock import Clock
from tests.support.drive import Recorder, drain
from tests.support.store import claim

SCOPE = Scope(tenant="t1", user="u1")
LOOKUP = [{"tool_calls": [{"name": "lookup", "args": {"key": "k"}}]}, {"text": "done"}]


@pytest.fixture
def exported(monkeypatch) -> Iterator[tuple[OtelTracing, InMemorySpanExporter]]:
    """This process traced, its spans kept in memory."""
    module = importlib.import_module("agentq.telemetry.tracing")  # the package's name is the function
    exporter = InMemorySpanExporter()
    provider = TracerProvider(id_generator=ReservedIds())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    traced = OtelTracing(provider, None)
    monkeypatch.setattr(module, "_current", [traced])
    yield traced, exporter
    provider.shutdown()


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def runtime(sqlite_store, clock):
    registry = Registry.from_modules(["agentq.tools.demo", "tests.support.tools_for_tests"])
    return Runtime(store=sqlite_store, registry=registry, pubsub=Recorder(),
                   config=Config(lease_s=30.0), clock=clock, sleep=lambda s: None)


@pytest.fixture
def commands(runtime, clock):
    return Commands(runtime.store, runtime.registry, clock=clock,
                    close_round=runtime.pubsub.close_round)


def post_in_request(traced: OtelTracing, commands: Commands, cid: str, text: str):
    """Post a message as the API does, inside its request's span; (request span, follow-ups)."""
    with traced.provider.get_tracer("test").start_as_current_span("POST messages") as request:
        _, follow = commands.post_message(cid, text, SCOPE)
    return request, follow


def steps(exporter: InMemorySpanExporter) -> list:
    return sorted((s for s in exporter.get_finished_spans() if s.name.startswith("step ")),
                  key=lambda s: s.start_time)


def test_every_step_of_a_turn_is_a_child_of_the_request_that_posted_its_message(
    exported, runtime, commands
):
    traced, exporter = exported
    cid = commands.create_conversation(SCOPE, {"script": LOOKUP}).id
    request, follow = post_in_request(traced, commands, cid, "go")
    drain(runtime, follow)
    found = steps(exporter)
    assert [s.name for s in found] == ["step llm", "step tool", "step llm"]
    assert all(s.parent.span_id == request.get_span_context().span_id for s in found)
    assert {s.context.trace_id for s in found} == {request.get_span_context().trace_id}
    user_msg = runtime.store.log.list_events(cid)[0]
    assert user_msg.content["traceparent"] == runtime.store.conversations.load(cid).fsm.trace


def test_a_message_that_waited_in_the_inbox_runs_in_the_trace_of_its_own_request(
    exported, runtime, commands
):
    traced, exporter = exported
    cid = commands.create_conversation(SCOPE, {"script": LOOKUP, "script_repeat": True}).id
    first, follow = post_in_request(traced, commands, cid, "one")
    second, queued = post_in_request(traced, commands, cid, "two")  # the first turn runs
    assert runtime.store.log.list_events(cid)[-1].content["text"] == "one"
    drain(runtime, follow + queued)
    by_trace = {}
    for span in steps(exporter):
        by_trace.setdefault(span.context.trace_id, []).append(span.attributes["agentq.turn.id"])
    assert set(by_trace) == {first.get_span_context().trace_id, second.get_span_context().trace_id}
    assert all(len(turns) == 3 and len(set(turns)) == 1 for turns in by_trace.values())


def test_a_turn_that_calls_a_sub_agent_is_one_trace_with_the_childs_steps_under_its_invocation(
    exported, runtime, commands, clock
):
    traced, exporter = exported
    runtime.store.agents.create("t1", AgentDefinition(name="researcher", settings=Settings(
        script=LOOKUP)), now=clock())
    cid = commands.create_conversation(SCOPE, {"agents": ["researcher"], "script": [
        {"tool_calls": [{"name": "researcher", "args": {"input": "dig"}}]}, {"text": "dug"}]}).id
    request, follow = post_in_request(traced, commands, cid, "go")
    drain(runtime, follow)
    (call,) = runtime.store.calls.list_of(cid)
    child = child_conversation_id(cid, call.id)
    found = steps(exporter)
    by_conversation = {c: [s.name for s in found if s.attributes["agentq.conversation.id"] == c]
                       for c in (cid, child)}
    assert by_conversation == {cid: ["step llm", "step tool", "step child", "step llm"],
                               child: ["step llm", "step tool", "step llm"]}
    assert {s.context.trace_id for s in exporter.get_finished_spans()} == {
        request.get_span_context().trace_id}
    (invoked,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent researcher"]
    (start,) = [s for s in found if s.context.span_id == invoked.parent.span_id]
    assert start.attributes["agentq.conversation.id"] == cid
    assert invoked.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert invoked.attributes["gen_ai.conversation.id"] == child
    for span in found:
        mine = span.attributes["agentq.conversation.id"] == cid
        parent = request.get_span_context() if mine else invoked.context
        assert span.parent.span_id == parent.span_id
        assert span.attributes["agentq.step.attempt"] == 1
    assert len({s.attributes["agentq.step.key"] for s in found}) == len(found)


def _tool_step(runtime, cid) -> ToolStep:
    (call,) = runtime.store.calls.list_of(cid)
    conversation, record = runtime.store.calls.load_with_conversation(cid, call.id)
    return ToolStep(runtime._ctx, runtime.registry, conversation, record)


def test_an_attempt_that_takes_over_links_to_the_one_it_replaced(exported, runtime, commands, clock):
    traced, exporter = exported
    cid = commands.create_conversation(SCOPE, {"script": LOOKUP}).id
    _, follow = post_in_request(traced, commands, cid, "go")
    runtime.advance(cid)  # the model asks for the call
    work = _tool_step(runtime, cid)
    dead = traced.reserve(runtime.store.conversations.load(cid).fsm.trace)
    claim(runtime.store, work.step.key, worker=f"host:1:1{SPAN_MARK}{dead}", lease_s=30,
          now=clock(), max_attempts=5)  # an attempt whose worker dies: its span never ends
    clock.tick(31)
    runtime._lifecycle.run(work)
    (taken,) = [s for s in steps(exporter) if s.name == "step tool"]
    assert taken.attributes["agentq.step.attempt"] == 2
    assert taken.attributes["agentq.step.outcome"] == "succeeded"
    (link,) = taken.links
    assert f"{link.context.trace_id:032x}-{link.context.span_id:016x}" == dead
    assert runtime.store.steps.load(work.step.key).worker.endswith(
        f"{taken.context.trace_id:032x}-{taken.context.span_id:016x}")


class OvertakenToolStep(ToolStep):
    """A tool step whose lease another worker takes over while its tool runs."""

    def run(self, claim_, lost):
        outcome = super().run(claim_, lost)
        claim(self.ctx.store, self.step.key, worker="w-new", lease_s=30,
              now=self.ctx.clock() + timedelta(seconds=31),
              max_attempts=5)
        return outcome


def test_a_commit_that_lost_its_race_ends_its_span_as_lost_not_as_a_success(
    exported, runtime, commands
):
    traced, exporter = exported
    cid = commands.create_conversation(SCOPE, {"script": LOOKUP}).id
    post_in_request(traced, commands, cid, "go")
    runtime.advance(cid)
    (call,) = runtime.store.calls.list_of(cid)
    conversation, record = runtime.store.calls.load_with_conversation(cid, call.id)
    work = OvertakenToolStep(runtime._ctx, runtime.registry, conversation, record)
    assert runtime._lifecycle.run(work) == []
    (lost,) = [s for s in steps(exporter) if s.name == "step tool"]
    assert lost.attributes["agentq.step.outcome"] == "lost"
    assert lost.status.is_ok and lost.status.status_code.name == "UNSET"
    assert runtime.store.steps.load(work.step.key).worker == "w-new"
    assert [s.name for s in exporter.get_finished_spans()].count("execute_tool lookup") == 1


def test_without_tracing_the_claim_records_the_worker_alone(runtime, commands):
    assert not process_tracing().enabled
    cid = commands.create_conversation(SCOPE, {"script": LOOKUP}).id
    drain(runtime, commands.post_message(cid, "go", SCOPE)[1])
    assert all(SPAN_MARK not in (s.worker or "") for s in runtime.store.steps.list_of(cid))
    assert "traceparent" not in runtime.store.log.list_events(cid)[0].content


def test_a_handoff_is_a_transfer_span_under_its_model_step_naming_both_agents(
    exported, runtime, commands, clock
):
    traced, exporter = exported
    runtime.store.agents.create("t1", AgentDefinition(name="billing", settings=Settings(
        script=[{"text": "billed"}], script_repeat=True)), now=clock())
    cid = commands.create_conversation(SCOPE, {"handoffs": ["billing"], "script": [
        {"tool_calls": [{"name": "transfer_to_billing", "args": {"reason": "money"}}]}]}).id
    request, follow = post_in_request(traced, commands, cid, "refund")
    drain(runtime, follow)
    (span,) = [s for s in exporter.get_finished_spans()
               if s.name == "execute_tool transfer_to_billing"]
    assert span.attributes["agentq.handoff.to"] == "billing"
    assert "agentq.handoff.from" not in span.attributes  # raw settings held it: no agent name
    (model_step,) = [s for s in steps(exporter) if s.context.span_id == span.parent.span_id]
    assert model_step.name == "step llm"
    assert span.context.trace_id == request.get_span_context().trace_id
