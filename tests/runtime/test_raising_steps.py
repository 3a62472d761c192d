"""No failure hides (inv. 12): a step that keeps raising, wherever it raises, counts one fault
per attempt and, its faults used up, ends its turn visibly: an `error` event naming the
cause, a `turn.failed` webhook, a conversation no longer `running`, nothing for
`agentq check` to flag. The sweeper's re-drives are `runtime.sweep()` on a clock moved past
its period."""
from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime, timedelta

import pytest

from agentq.cli.check import check_conversation
from agentq.commands import Commands
from agentq.config import Config
from agentq.core.decide import Step
from agentq.core.keys import MODEL_STEP
from agentq.core.scope import Scope
from agentq.runtime import Runtime
from agentq.runtime import runtime as runtime_module
from agentq.store import NewStep
from agentq.store.webhooks import WebhookEndpoint
from agentq.tenancy.policy import McpServer, Policy
from agentq.tools import Registry
from tests.support.clock import Clock
from tests.support.drive import Recorder, drain
from tests.support.raising_server import BROKEN, CAUSE, RaisingServer

SCOPE = Scope(tenant="acme", user="u1")
MAX_ATTEMPTS = 3
CONFIG = Config(lease_s=10.0, sweep_s=15.0, max_attempts=MAX_ATTEMPTS)  # a sweep each lease
GREET = [{"tool_calls": [{"name": f"mcp__{BROKEN}__greet", "args": {"name": "Ada"}}]},
         {"text": "done"}]


@pytest.fixture
def clock():
    return Clock()


def runtime_with(store, clock, source=None) -> Runtime:
    registry = Registry.from_modules(["agentq.tools.demo"], [source] if source else [])
    return Runtime(store=store, registry=registry, pubsub=Recorder(), config=CONFIG,
                   clock=clock, sleep=lambda s: None)


def started(runtime, clock, settings) -> str:
    """A conversation of `settings` whose first message was posted and driven."""
    policy = dataclasses.replace(Policy.default(), mcp={BROKEN: McpServer(url="http://127.0.0.1:9/mcp")})
    commands = Commands(runtime.store, runtime.registry, clock=clock, policy=policy)
    cid = commands.create_conversation(SCOPE, settings).id
    drain(runtime, commands.post_message(cid, "hello", SCOPE)[1])
    return cid


def swept_until_settled(runtime, clock, cid) -> None:
    """Let the sweeper re-drive the conversation until its turn no longer runs."""
    for _ in range(2 * MAX_ATTEMPTS + 2):
        if runtime.store.conversations.load(cid).fsm.state != "running":
            return
        clock.tick(CONFIG.sweep_s + 1)
        drain(runtime, runtime.sweep())
    raise AssertionError("the turn still runs after every attempt was re-driven")


def webhook_endpoint(store) -> str:
    now = datetime(2026, 11, 21, tzinfo=UTC)
    found = WebhookEndpoint(
        id="we_acme", tenant="acme", url="https://hooks.example.com/x", event_types=["turn.failed"],
        sealed_secret="sealed", previous_sealed=None, previous_until=None, enabled=True,
        disabled_reason=None, failing_since=None, created_at=now, updated_at=now)
    assert store.webhooks.add_endpoint(found, max_per_tenant=10)
    return found.id


def test_a_model_step_whose_tool_server_raises_as_it_is_listed_fails_its_turn_naming_the_cause(
        store, clock, caplog):
    source = RaisingServer()
    runtime = runtime_with(store, clock, source)
    hook = webhook_endpoint(store)
    cid = started(runtime, clock, {"tools": [f"mcp:{BROKEN}"], "script": GREET})
    swept_until_settled(runtime, clock, cid)
    events = store.log.list_events(cid)
    assert [e.type for e in events] == ["user_msg", "error"]
    error = events[-1].content
    assert error["code"] == "max_attempts" and f"TypeError: {CAUSE}" in error["message"]
    assert store.conversations.load(cid).fsm.state == "failed"
    (step,) = store.steps.list_of(cid)
    assert (step.kind, step.status, step.faults, step.deaths) == (
        MODEL_STEP, "failed_permanent", MAX_ATTEMPTS, 0)
    assert source.listings == MAX_ATTEMPTS  # one listing an attempt, each counted once
    logged = [r for r in caplog.records if r.name == "agentq.runtime.faults" and r.exc_info]
    assert len(logged) == MAX_ATTEMPTS and all(CAUSE in r.getMessage() for r in logged)
    assert [d.event_type for d in store.webhooks.list_deliveries(hook, limit=10)] == ["turn.failed"]
    assert check_conversation(store, cid) == []


def test_a_tool_step_whose_server_raises_in_its_call_counts_faults_not_deaths_then_fails_its_call(
        store, clock):
    source = RaisingServer(lists=True)
    runtime = runtime_with(store, clock, source)
    cid = started(runtime, clock, {"tools": [f"mcp:{BROKEN}"], "script": GREET})
    swept_until_settled(runtime, clock, cid)
    result = next(e.content for e in store.log.list_events(cid) if e.type == "tool_result")
    assert result["status"] == "error" and f"TypeError: {CAUSE}" in result["output"]
    assert store.log.list_events(cid)[-1].content["text"] == "done"  # the model read why, and went on
    (tool,) = [s for s in store.steps.list_of(cid) if s.kind == "tool"]
    assert (tool.status, tool.attempts, tool.faults, tool.deaths) == (
        "failed_permanent", MAX_ATTEMPTS, MAX_ATTEMPTS, 0)
    assert source.calls == MAX_ATTEMPTS
    assert check_conversation(store, cid) == []


def test_an_advance_that_raises_before_any_step_is_decided_fails_its_running_turn(
        store, clock, monkeypatch):
    def decide(view):
        raise RuntimeError("no rule for this log\nSELECT * FROM steps -- [parameters: ...]")

    runtime = runtime_with(store, clock)
    monkeypatch.setattr(runtime_module, "decide", decide)
    cid = started(runtime, clock, {"script": [{"text": "hi"}]})
    assert store.conversations.load(cid).fsm.state == "running"
    swept_until_settled(runtime, clock, cid)
    events = store.log.list_events(cid)
    assert [e.type for e in events] == ["user_msg", "error"]
    message = events[-1].content["message"]
    assert "RuntimeError: no rule for this log" in message and "SELECT" not in message
    (step,) = store.steps.list_of(cid)  # the model step the turn was stalled at, blamed
    assert (step.kind, step.ref, step.faults) == (MODEL_STEP, {"after_seq": 1}, MAX_ATTEMPTS)
    assert check_conversation(store, cid) == []


def test_a_model_step_whose_commit_raises_once_is_a_fault_not_a_death_and_runs_again(
        store, clock, caplog, monkeypatch):
    runtime = runtime_with(store, clock)
    commit = store.writes.commit_step
    raised: list[str] = []

    def commit_once(*args, **kwargs):
        if not raised:
            raised.append("once")
            raise ConnectionResetError("the server closed the connection")
        return commit(*args, **kwargs)

    monkeypatch.setattr(store.writes, "commit_step", commit_once)
    with caplog.at_level(logging.ERROR, logger="agentq.runtime.lifecycle"):
        cid = started(runtime, clock, {"script": [{"text": "hi"}]})
        swept_until_settled(runtime, clock, cid)
    assert [e.type for e in store.log.list_events(cid)] == ["user_msg", "assistant_msg"]
    (step,) = store.steps.list_of(cid)
    assert (step.status, step.attempts, step.faults, step.deaths) == ("succeeded", 2, 1, 0)
    assert [r.getMessage() for r in caplog.records] == [
        "step raised ConnectionResetError: the server closed the connection"]
    assert check_conversation(store, cid) == []


def test_agentq_check_flags_a_model_step_given_up_without_the_error_event_of_its_turn(
        store, clock):
    runtime = runtime_with(store, clock)
    commands = Commands(store, runtime.registry, clock=clock)
    cid = commands.create_conversation(SCOPE, {"script": [{"text": "hi"}]}).id
    commands.post_message(cid, "hello", SCOPE)  # its advance is never run
    step = Step.model(cid, 1)
    for _ in range(MAX_ATTEMPTS):
        store.steps.fault(NewStep.of(step, cid, "task", tenant="acme"), error="KeyError: x",
                          now=clock(), retry_at=clock())
    assert store.steps.give_up(step.key, max_attempts=MAX_ATTEMPTS, now=clock()).last_error == (
        "KeyError: x")
    (violation,) = check_conversation(store, cid)  # given up, but its turn still runs
    assert violation.invariant == "12 no failure hides" and step.key in violation.message


def test_the_tasks_that_raise_together_before_the_claim_count_one_fault(store, clock):
    source = RaisingServer()
    runtime = runtime_with(store, clock, source)
    cid = started(runtime, clock, {"tools": [f"mcp:{BROKEN}"], "script": GREET})
    assert runtime.advance(cid) == [] and runtime.advance(cid) == []  # a burst of re-drives
    (step,) = store.steps.list_of(cid)
    assert (source.listings, step.faults, step.status) == (3, 1, "scheduled")
    assert step.lease_until == clock() + timedelta(seconds=CONFIG.lease_s)  # until it is due


def test_a_compact_task_that_raises_for_a_conversation_no_longer_running_counts_nothing(
        store, clock, monkeypatch):
    def compact(*args, **kwargs):
        raise RuntimeError("the summary cannot be written")

    runtime = runtime_with(store, clock)
    cid = started(runtime, clock, {"script": [{"text": "hi"}]})
    assert store.conversations.load(cid).fsm.state == "idle"
    monkeypatch.setattr(runtime_module.compact_step, "compact", compact)
    for _ in range(MAX_ATTEMPTS + 1):
        assert runtime.compact(cid, 2) == []
        clock.tick(CONFIG.lease_s + 1)
    assert [e.type for e in store.log.list_events(cid)] == ["user_msg", "assistant_msg"]
    assert [s.kind for s in store.steps.list_of(cid)] == [MODEL_STEP]
