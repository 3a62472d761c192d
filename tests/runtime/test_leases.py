"""The lease keeper: every lease of a process renewed by one statement per period, and a
step that is no longer ours (an interrupt cancelled it) found by one statement per check."""
from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from agentq.process.clock import utcnow
from agentq.config import Config
from agentq.core.decide import Step
from agentq.core.settings import Settings
from agentq.runtime.context import StepContext
from agentq.runtime.leases import Leases
from agentq.runtime.lifecycle import Lifecycle, StepWork
from agentq.runtime.notices import Notices
from agentq.runtime.timers import Timers
from agentq.store import NewStep, Store
from agentq.store.engine import begin_write
from tests.support.clock import T0
from tests.support.processes import wait_for


def test_one_statement_per_period_keeps_every_lease_and_finds_the_interrupted_step(sqlite_store):
    store = sqlite_store
    store.migrate()
    cid = store.conversations.create(tenant="acme", settings=Settings(), now=utcnow()).id
    keys = [f"s{i}" for i in range(50)]
    for key in keys:
        store.steps.schedule_and_claim(
            NewStep(key, cid, "llm", {"after_seq": 1}, "r1", f"task-{key}", "acme"),
            worker="w1", lease_s=0.9, now=utcnow(), max_attempts=5)
    calls = {"renew": 0, "check": 0}
    renew, check = store.leases.renew, store.leases.list_owned

    def counted(name, fn):
        def call(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return call

    store.leases.renew = counted("renew", renew)
    store.leases.list_owned = counted("check", check)
    leases = Leases(store, utcnow, Timers(), lease_s=0.9)  # renewed every 0.3 s
    beats = [leases.kept(key, "w1", period_s=0.1) for key in keys]
    for beat in beats:
        beat.__enter__()
    started = time.monotonic()
    try:
        store.steps.release("s7", worker="w1", status="cancelled", now=utcnow())  # an interrupt
        wait_for(lambda: beats[7].lost.is_set(), timeout_s=10, what="the interrupt to be heard")
        time.sleep(1.5)  # past the first lease: only renewals keep the others
        assert all(not b.lost.is_set() for i, b in enumerate(beats) if i != 7)
        assert all(store.steps.load(key).lease_until > utcnow() for key in keys if key != "s7")
        assert leases.held() == 49
    finally:
        for beat in beats:
            beat.__exit__(None, None, None)
    periods = (time.monotonic() - started) / 0.1
    # one statement per tick for all fifty steps, not fifty (ticks may run late, never more)
    assert 0 < calls["renew"] + calls["check"] <= periods + 2
    assert calls["renew"] >= 3
    assert leases.held() == 0


@pytest.mark.postgres
def test_a_claim_that_waits_for_a_connection_starts_its_lease_when_it_runs(pg_url):
    """Hundreds of green threads share a worker's few connections: a lease that began before
    its claim's wait for one could run out before its first renewal, and the step be taken
    over again by a worker that never stopped running it."""
    store = Store.open(pg_url, pool_size=1)
    cid = store.conversations.create(tenant="acme", settings=Settings(), now=T0).id
    step = NewStep("waits", cid, "llm", {"after_seq": 1}, "r1", "task-waits", "acme")
    now = [T0]
    claimed = []
    with store.engine.connect():  # the pool's one connection: the claim waits for it
        claiming = threading.Thread(target=lambda: claimed.append(store.steps.schedule_and_claim(
            step, worker="w1", lease_s=30, now=lambda: now[0], max_attempts=5)))
        claiming.start()
        now[0] = T0 + timedelta(seconds=20)  # the wait took 20 s
    claiming.join(timeout=60)
    store.dispose()
    assert claimed[0].lease_until == T0 + timedelta(seconds=50)


@pytest.mark.postgres
def test_a_renewal_goes_through_while_steps_hold_every_pooled_connection(pg_url):
    """The lease keeper has a connection of its own: a worker whose steps hold all of theirs
    (hundreds of green threads, a pool of ten) still keeps every lease."""
    store = Store.open(pg_url, pool_size=2)
    cid = store.conversations.create(tenant="acme", settings=Settings(), now=utcnow()).id
    store.steps.schedule_and_claim(NewStep("busy", cid, "llm", {"after_seq": 1}, "r1", "t-busy",
                                           "acme"), worker="w1", lease_s=30, now=utcnow(),
                                  max_attempts=5)
    renewed, owned = [], []

    def keep() -> None:
        renewed.append(store.leases.renew([("busy", "w1")], lease_s=60, now=utcnow()))
        owned.append(store.leases.list_owned([("busy", "w1")]))

    # the pool's every connection, held as steps hold theirs
    with begin_write(store.engine), begin_write(store.engine):
        keeper = threading.Thread(target=keep, daemon=True)
        keeper.start()
        keeper.join(timeout=30)  # queued for a pooled connection, it would wait a minute
        assert renewed == [{"busy"}] and owned == [{"busy"}]
    store.dispose()


class CommitsWhenLetGo(StepWork[str]):
    """A step whose commit waits until the test lets it go, as a commit on a busy worker
    waits for a pooled connection."""

    def __init__(self, ctx: StepContext, cid: str) -> None:
        super().__init__(ctx, cid, "acme", Step("llm", {"after_seq": 1}, "slow-commit", "r1"))
        self.committing, self.go = threading.Event(), threading.Event()

    def run(self, claim, lost):
        return "answer"

    def commit(self, claim, result):
        self.committing.set()
        self.go.wait(timeout=60)
        return []


class Unheard:
    """An announcer no stream listens to."""

    def new_events(self, conversation_id, last_seq):
        return None


def test_a_step_keeps_its_lease_while_its_commit_waits(sqlite_store):
    """Its lease let go before the commit, the step would be claimed again (its model called
    twice) while its first commit still waited, and that commit refused as stale."""
    store = sqlite_store
    cid = store.conversations.create(tenant="acme", settings=Settings(), now=utcnow()).id
    ctx = StepContext(store=store, clock=utcnow, config=Config(lease_s=0.9),
                      notices=Notices(Unheard()))
    lifecycle = Lifecycle(ctx, Leases(store, utcnow, Timers(), lease_s=0.9))
    work = CommitsWhenLetGo(ctx, cid)
    running = threading.Thread(target=lifecycle.run, args=(work,), daemon=True)
    running.start()
    try:
        assert work.committing.wait(timeout=30)
        time.sleep(2.0)  # past two leases: only renewals keep it ours
        taken = store.steps.schedule_and_claim(
            NewStep.of(work.step, cid, "task-again", tenant="acme"), worker="w2", lease_s=0.9,
            now=utcnow(), max_attempts=5)
        assert taken is None
        assert store.steps.load("slow-commit").attempts == 1
    finally:
        work.go.set()
        running.join(timeout=30)
