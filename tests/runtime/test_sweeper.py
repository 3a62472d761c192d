"""The sweeper that wakes for the next deadline: what it sends, when, and what a wake costs."""
from __future__ import annotations

import time
from datetime import timedelta

import pytest
from sqlalchemy import Engine, event

from agentq.commands import Commands
from agentq.config import Config
from agentq.core.decide import Step
from agentq.core.keys import task_id
from agentq.followups import Advance, Expire, RunTool
from agentq.runtime import Runtime
from agentq.runtime.sweeper import ETA_GRACE_S
from agentq.store import NewStep
from agentq.tools import Registry
from agentq.core.scope import Scope
from tests.support.clock import T0, Clock
from tests.support.drive import Recorder, drain

SCOPE = Scope(tenant="t1", user="u1")
APPROVE = [{"tool_calls": [{"name": "approve", "args": {"amount": 5}}]}, {"text": "ok"}]


@pytest.fixture
def runtime(store):
    return Runtime(store=store, registry=Registry.from_modules(["tests.support.tools_for_tests"]),
                   pubsub=Recorder(), config=Config(lease_s=6.0), clock=Clock())


def running_tool_step(runtime, *, worker="w1"):
    """A conversation whose tool step `worker` claimed now, under a 6 s lease."""
    commands = Commands(runtime.store, runtime.registry, clock=runtime.clock)
    conv = commands.create_conversation(SCOPE, {"script": []})
    step = Step.tool(conv.id, "call_1")
    runtime.store.steps.schedule_and_claim(
        NewStep.of(step, conv.id, task_id(step.key), tenant="t1"), worker=worker, lease_s=6.0,
        now=runtime.clock(), max_attempts=5)
    return conv.id, step


def pending_call(runtime):
    """A conversation waiting on a person whose call expires in 60 s."""
    commands = Commands(runtime.store, runtime.registry, clock=runtime.clock)
    conv = commands.create_conversation(SCOPE, {"script": APPROVE})
    _, follow = commands.post_message(conv.id, "pay", SCOPE)
    drain(runtime, follow)
    (call,) = runtime.store.calls.list_of(conv.id, status="pending")
    return conv.id, call


@pytest.fixture
def statements():
    """A list that every SQL statement this process runs, on any engine, is appended to."""
    seen: list[str] = []

    def record(conn, cursor, sql, *args):
        seen.append(sql)

    event.listen(Engine, "before_cursor_execute", record)
    yield seen
    event.remove(Engine, "before_cursor_execute", record)


def test_a_lease_that_runs_out_is_taken_up_when_it_does_and_only_once(runtime):
    sent = []
    sweeper = runtime.sweeper(sent.extend)
    lock = runtime.store.sweeps.lock(idle_s=10)
    assert sweeper.wake(lock) == 0.0  # took the lead: one full sweep, nothing to re-drive
    assert sent == []
    cid, step = running_tool_step(runtime)
    assert sweeper.wake(lock) == pytest.approx(sweeper.max_sleep_s)  # 3 s: the lease is 6 s off
    runtime.clock.tick(4)
    assert sweeper.wake(lock) == pytest.approx(2.01)  # sleeps until the lease runs out
    runtime.clock.tick(2.01)
    assert sweeper.wake(lock) == 0.0
    assert sent == [RunTool(cid, "call_1", step.key, tool=None)]
    assert sweeper.wake(lock) == pytest.approx(sweeper.max_sleep_s)  # sent once, not again
    assert len(sent) == 1
    lock.close()


def test_a_renewed_lease_is_left_alone(runtime):
    sent = []
    sweeper = runtime.sweeper(sent.extend)
    lock = runtime.store.sweeps.lock(idle_s=10)
    sweeper.wake(lock)
    _, step = running_tool_step(runtime)
    runtime.clock.tick(4)
    assert runtime.store.steps.heartbeat(step.key, worker="w1", lease_s=6, now=runtime.clock())
    runtime.clock.tick(4)
    assert sweeper.wake(lock) == pytest.approx(2.01)
    assert sent == []
    lock.close()


def test_a_pending_call_whose_expiry_was_lost_is_expired_a_grace_after_its_deadline(runtime):
    sent = []
    sweeper = runtime.sweeper(sent.extend)
    lock = runtime.store.sweeps.lock(idle_s=10)
    cid, call = pending_call(runtime)
    sweeper.wake(lock)
    runtime.clock.now = call.expires_at
    assert sweeper.wake(lock) == pytest.approx(ETA_GRACE_S + 0.01)  # its ETA task goes first
    runtime.clock.tick(ETA_GRACE_S)
    assert sweeper.wake(lock) == 0.0
    assert sent == [Expire(cid, call.id, Step.expire(cid, call.id).key, None)]
    drain(runtime, sent)
    assert runtime.store.calls.load(cid, call.id).status == "expired"
    lock.close()


def test_a_wake_on_a_quiet_deployment_is_one_statement(runtime, statements):
    sweeper = runtime.sweeper(lambda due: None)
    lock = runtime.store.sweeps.lock(idle_s=10)
    sweeper.wake(lock)  # the lead: takes the lock and sweeps everything once
    seen = statements
    seen.clear()
    for _ in range(3):
        assert sweeper.wake(lock) == pytest.approx(sweeper.max_sleep_s)
    queries = [sql for sql in seen if sql.strip().upper() not in ("BEGIN", "COMMIT")]
    assert len(queries) == 3 and all(sql.lstrip().upper().startswith("SELECT") for sql in queries)
    lock.close()


@pytest.mark.postgres
def test_one_candidate_leads_at_a_time_and_another_takes_over_when_it_stops(pg_store_clean):
    first = pg_store_clean.sweeps.lock(idle_s=10)
    second = pg_store_clean.sweeps.lock(idle_s=10)
    assert first.acquire() and not second.acquire()
    first.close()
    assert second.acquire()
    second.close()


@pytest.mark.postgres
def test_a_leader_that_goes_quiet_loses_the_lock_to_the_server(pg_store_clean):
    paused = pg_store_clean.sweeps.lock(idle_s=0.5)
    other = pg_store_clean.sweeps.lock(idle_s=10)
    assert paused.acquire()
    time.sleep(1.5)  # the server ends the idle session: its lock goes with it
    assert other.acquire()
    with pytest.raises(Exception):
        paused.next_deadlines(lease_after=T0, hold_after=T0, call_after=T0)
    paused.close()
    other.close()


def test_a_held_step_is_re_driven_a_grace_after_its_hold_ends(runtime):
    sent = []
    sweeper = runtime.sweeper(sent.extend)
    lock = runtime.store.sweeps.lock(idle_s=10)
    sweeper.wake(lock)
    commands = Commands(runtime.store, runtime.registry, clock=runtime.clock)
    conv = commands.create_conversation(SCOPE, {"script": []})
    step = Step.model(conv.id, 0)
    until = runtime.clock() + timedelta(seconds=2)
    runtime.store.steps.hold(NewStep.of(step, conv.id, task_id(step.key), tenant="t1"),
                             until=until, reason="breaker open", now=runtime.clock())
    runtime.clock.now = until + timedelta(seconds=ETA_GRACE_S)
    assert sweeper.wake(lock) == 0.0
    assert sent == [Advance(conv.id)]
    lock.close()

