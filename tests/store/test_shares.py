"""A tenant's share of the workers: the capped claim in the ledger, on SQLite and PostgreSQL,
and the runtime that leaves a capped step waiting and wakes it when a slot of its tenant frees.
"""
from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta

import pytest

from agentq.commands import Commands
from agentq.config import Config
from agentq.core.events import ToolCallRecord
from agentq.core.settings import Settings
from agentq.followups import Advance
from agentq.tenancy.access import provider_for
from agentq.runtime import Runtime
from agentq.runtime.shares import Shares
from agentq.worker.queues import MODEL, TOOLS, queue_of
from agentq.store import NewStep, StepRecord, Store
from agentq.tools import Registry
from agentq.core.scope import Scope
from tests.support.clock import T0, Clock
from tests.support.drive import Recorder, drain
from tests.support.rules import Rules

LEASE_S = 30


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def conversation(store: Store, tenant: str = "acme") -> str:
    return store.conversations.create(tenant=tenant, settings=Settings(), now=T0).id


def claim(store: Store, cid: str, key: str, *, cap: int | None, seconds: float = 0,
          tenant: str = "acme", kind: str = "llm", worker: str = "w1",
          kinds: tuple[str, ...] | None = None) -> StepRecord | None:
    """Schedule-and-claim step `key` of `cid` for `worker`, held to `cap` (of `kinds`)."""
    step = NewStep(key, cid, kind, {"after_seq": 1}, None, f"task-{key}", tenant)
    return store.steps.schedule_and_claim(step, worker=worker, lease_s=LEASE_S, now=at(seconds),
                                          max_attempts=5, cap=cap, cap_kinds=kinds)


def status(store: Store, key: str) -> str:
    return store.steps.load(key).status


def finish(store: Store, cid: str, key: str, *, worker: str = "w1", seconds: float = 1) -> None:
    with store.writes.locked(cid) as tx:
        assert tx.finish_step(key, worker=worker, now=at(seconds))


# the capped claim


def test_a_capped_tenant_runs_at_most_its_cap_and_the_rest_wait_without_an_attempt(store):
    cid = conversation(store)
    outcomes = [claim(store, cid, f"s{n}", cap=2, seconds=n) for n in range(4)]
    assert [o.status for o in outcomes] == ["running", "running", "waiting", "waiting"]
    waiting = store.steps.load("s2")
    assert (waiting.attempts, waiting.worker, waiting.lease_until, waiting.tenant) == (0, None, None, "acme")


def test_another_tenants_steps_take_none_of_its_slots(store):
    acme, globex = conversation(store, "acme"), conversation(store, "globex")
    assert claim(store, acme, "a1", cap=1).status == "running"
    assert claim(store, globex, "g1", cap=1, tenant="globex").status == "running"
    assert claim(store, acme, "a2", cap=1).status == "waiting"


def test_a_waiting_step_keeps_its_place_and_a_newer_one_does_not_pass_it(store):
    cid = conversation(store)
    claim(store, cid, "first", cap=1, seconds=0)
    assert claim(store, cid, "second", cap=1, seconds=1).status == "waiting"
    finish(store, cid, "first", seconds=2)
    # a slot is free, but "second" has waited for it: a step that comes later waits behind it
    assert claim(store, cid, "third", cap=1, seconds=3).status == "waiting"
    assert claim(store, cid, "second", cap=1, seconds=4).status == "running"
    finish(store, cid, "second", seconds=5)
    assert claim(store, cid, "third", cap=1, seconds=6).status == "running"


def test_the_next_waiting_step_is_the_first_to_arrive_with_its_tools_name(store):
    cid = conversation(store)
    claim(store, cid, "busy", cap=1)
    with store.writes.locked(cid) as tx:
        tx.put_tool_calls([_call(cid, "c1", "get_weather")])
    tool = NewStep("tool-1", cid, "tool", {"tool_call_id": "c1"}, None, "task-tool-1", "acme")
    store.steps.schedule_and_claim(tool, worker="w2", lease_s=LEASE_S, now=at(1), max_attempts=5, cap=1)
    claim(store, cid, "llm-2", cap=1, seconds=2)
    step, name = store.backlog.next_waiting_step("acme")
    assert (step.step_key, step.status, name) == ("tool-1", "waiting", "get_weather")
    assert store.backlog.next_waiting_step("globex") is None


def test_a_dead_workers_slot_frees_when_its_lease_runs_out(store):
    cid = conversation(store)
    claim(store, cid, "dead", cap=1, worker="dead-worker")
    assert claim(store, cid, "next", cap=1, seconds=LEASE_S - 1).status == "waiting"
    assert claim(store, cid, "next", cap=1, seconds=LEASE_S + 1).status == "running"


def test_a_step_taken_over_after_its_lease_ran_out_waits_if_the_slot_is_gone(store):
    cid = conversation(store)
    claim(store, cid, "dead", cap=1, worker="dead-worker")
    assert claim(store, cid, "next", cap=1, seconds=LEASE_S + 1).status == "running"
    taken_over = claim(store, cid, "dead", cap=1, seconds=LEASE_S + 2, worker="w2")
    assert (taken_over.status, taken_over.worker, taken_over.attempts) == ("waiting", None, 1)


def test_a_step_another_worker_holds_is_neither_claimed_nor_left_waiting(store):
    cid = conversation(store)
    claim(store, cid, "held", cap=5, worker="other")
    assert claim(store, cid, "held", cap=5, seconds=1) is None
    assert status(store, "held") == "running"


def test_without_a_cap_a_waiting_step_is_claimed_like_any_other(store):
    cid = conversation(store)
    claim(store, cid, "busy", cap=1)
    claim(store, cid, "queued", cap=1, seconds=1)
    assert claim(store, cid, "queued", cap=None, seconds=2).status == "running"


@pytest.mark.parametrize("cap", [1, 3])
def test_claims_at_once_never_take_more_slots_than_the_cap(store, cap):
    outcomes: list[str] = []
    for round_ in range(3):  # a tenant of its own each round: the waiting steps keep their places
        tenant = f"t{round_}"
        cid = conversation(store, tenant)
        barrier = threading.Barrier(8)

        def contend(n: int) -> None:
            barrier.wait()
            found = claim(store, cid, f"{tenant}-s{n}", cap=cap, tenant=tenant, worker=f"w{n}")
            outcomes.append(found.status)

        threads = [threading.Thread(target=contend, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        running = [s for s in store.steps.list_of(cid) if s.status == "running"]
        assert len(running) == cap, f"round {round_}: {len(running)} running, cap {cap}"
    assert outcomes.count("running") == 3 * cap
    assert outcomes.count("waiting") == 3 * (8 - cap)


def test_the_sweeper_listing_gives_each_tenants_running_count_and_first_waiting_steps(store):
    acme, globex = conversation(store, "acme"), conversation(store, "globex")
    claim(store, acme, "a-run", cap=1)
    for n in range(3):
        claim(store, acme, f"a-wait-{n}", cap=1, seconds=1 + n)
    claim(store, globex, "g-dead", cap=1, tenant="globex", worker="dead", seconds=-2 * LEASE_S)
    claim(store, globex, "g-next", cap=1, tenant="globex", seconds=-LEASE_S)
    running, waiting = store.backlog.list_waiting_steps(now=at(5), per_tenant=2)
    assert running == {"acme": 1}  # globex's one running step lost its lease
    assert [(step.tenant, step.step_key) for step, _ in waiting] == [
        ("acme", "a-wait-0"), ("acme", "a-wait-1"), ("globex", "g-next")]


def _call(cid: str, call_id: str, name: str) -> ToolCallRecord:
    return ToolCallRecord(conversation_id=cid, id=call_id, name=name, executor="server",
                          status="scheduled", args={}, round_id="r1", turn_id="t1", created_at=T0)


# the runtime: a capped step waits holding no worker, and starts when a slot of its tenant frees

SCOPE = Scope(tenant="acme", user="u1")
ANSWER = [{"text": "done"}]


class HeldProviders:
    """The scripted provider, except that calls for `held` conversations wait for `go`."""

    def __init__(self) -> None:
        self.held: set[str] = set()
        self.go = threading.Event()
        self.calls: list[str] = []

    def __call__(self, settings):
        inner, outer = provider_for(settings), self

        class Held:
            def stream(self, request, ctx, cancel):
                outer.calls.append(ctx.conversation_id)
                if ctx.conversation_id in outer.held:
                    assert outer.go.wait(30), "the held call was never let go"
                return inner.stream(request, ctx, cancel)

        return Held()


@pytest.fixture
def providers() -> HeldProviders:
    return HeldProviders()


@pytest.fixture
def runtime(store, providers) -> Runtime:
    return Runtime(store=store, registry=Registry([]), pubsub=Recorder(), config=Config(lease_s=LEASE_S),
                   clock=Clock(), sleep=lambda s: None,
                   rules=Rules(providers=providers, running=lambda tenant: 1))


@pytest.fixture
def commands(runtime) -> Commands:
    return Commands(runtime.store, runtime.registry, clock=runtime.clock)


def posted(commands: Commands, text: str = "hi") -> tuple[str, list]:
    cid = commands.create_conversation(SCOPE, {"script": ANSWER}).id
    _, follow = commands.post_message(cid, text, SCOPE)
    return cid, follow


def llm_step(store: Store, cid: str) -> StepRecord:
    [step] = [s for s in store.steps.list_of(cid) if s.kind == "llm"]
    return step


def hold_a_slot(store: Store, cid: str, clock: Clock) -> None:
    """A step of the conversation's tenant that another worker runs, under a live lease."""
    step = NewStep("elsewhere", cid, "llm", {"after_seq": 0}, None, "task-elsewhere", "acme")
    assert store.steps.schedule_and_claim(step, worker="elsewhere", lease_s=LEASE_S, now=clock(),
                                          max_attempts=5, cap=1).status == "running"


def idle_with_answer(store: Store, cid: str) -> bool:
    return (store.conversations.load(cid).fsm.state == "idle"
            and store.log.list_events(cid)[-1].content.get("text") == "done")


def test_a_step_past_its_tenants_cap_waits_holding_no_worker_and_starts_when_the_slot_frees(
    store, runtime, commands, providers
):
    first, first_follow = posted(commands)
    providers.held.add(first)
    worker = threading.Thread(target=drain, args=(runtime, first_follow))
    worker.start()
    try:
        assert _eventually(lambda: providers.calls == [first]), "the first call never started"
        second, second_follow = posted(commands)
        assert drain(runtime, second_follow) == []  # returned at once: no worker held
        assert llm_step(store, second).status == "waiting" and providers.calls == [first]
    finally:
        providers.go.set()
        worker.join(30)
    # the first step's commit woke the second, and the same worker ran it
    assert idle_with_answer(store, first) and idle_with_answer(store, second)
    assert providers.calls == [first, second]


def test_a_task_holding_its_wake_ups_wakes_the_waiting_step_after_its_own_follow_ups(
    store, runtime, commands, providers
):
    first, first_follow = posted(commands)
    providers.held.add(first)
    freed: list = []

    def run_first() -> None:
        with runtime.wakes_held() as held:
            drain(runtime, first_follow)
        freed.extend(held)

    worker = threading.Thread(target=run_first)
    worker.start()
    try:
        assert _eventually(lambda: providers.calls == [first]), "the first call never started"
        second, second_follow = posted(commands)
        assert drain(runtime, second_follow) == []
        assert llm_step(store, second).status == "waiting"
    finally:
        providers.go.set()
        worker.join(30)
    # the first turn ran to its end; what its freed slot wakes was left to the caller
    assert idle_with_answer(store, first) and llm_step(store, second).status == "waiting"
    assert freed and {tenant for tenant, _ in freed} == {"acme"}
    woken = runtime.wake(freed)
    assert woken == [Advance(second)]
    drain(runtime, woken)
    assert idle_with_answer(store, second)


def test_a_step_left_waiting_looks_once_more_and_takes_a_slot_freed_before_its_row_was_seen(
    store, runtime, commands, monkeypatch
):
    """The step holding the slot finishes between the claim that left this one waiting and
    the look after it, as when its wake read ran before the waiting row was there: no
    wake-up comes (none is sent here, and this runtime has no sweeper), so only the second
    look starts the step."""
    first, _ = posted(commands)
    hold_a_slot(store, first, runtime.clock)
    second, follow = posted(commands)
    claim_step, looks = store.steps.schedule_and_claim, []

    def claim_then_free_the_slot(step, **kwargs):
        record = claim_step(step, **kwargs)
        looks.append(record.status)
        if record.status == "waiting" and len(looks) == 1:
            finish(store, first, "elsewhere", worker="elsewhere")  # and wakes nothing here
        return record

    monkeypatch.setattr(store.steps, "schedule_and_claim", claim_then_free_the_slot)
    drain(runtime, follow)
    assert looks[:2] == ["waiting", "running"]
    assert idle_with_answer(store, second)


def test_two_slots_freed_at_once_fill_both_though_their_wake_reads_name_the_same_step(
    store, commands, providers
):
    """Both wake-ups name the first waiting step; one task claims it, the other finds it
    taken and passes its wake-up on, so the second slot runs the next waiting step now, not
    when the first ends (and a collision per pair of finishes no longer leaks a slot until
    none runs at all: no beat here)."""
    runtime = Runtime(store=store, registry=Registry([]), pubsub=Recorder(),
                      config=Config(lease_s=LEASE_S), clock=Clock(), sleep=lambda s: None,
                      rules=Rules(providers=providers, running=lambda tenant: 2))
    first, second = posted(commands)[0], posted(commands)[0]
    hold_a_slot(store, first, runtime.clock)
    other = NewStep("elsewhere-2", second, "llm", {"after_seq": 0}, None, "task-e2", "acme")
    assert store.steps.schedule_and_claim(other, worker="elsewhere", lease_s=LEASE_S,
                                          now=runtime.clock(), max_attempts=5, cap=2).status == "running"
    third, third_follow = posted(commands)
    fourth, fourth_follow = posted(commands)
    providers.held.update({third, fourth})  # their model calls wait for `go`
    assert drain(runtime, third_follow + fourth_follow) == []
    assert llm_step(store, third).status == llm_step(store, fourth).status == "waiting"
    finish(store, first, "elsewhere", worker="elsewhere")
    finish(store, second, "elsewhere-2", worker="elsewhere")
    # each freed slot's wake read runs before either woken task: both name the same step
    woken = runtime.wake([("acme", None)]) + runtime.wake([("acme", None)])
    assert len(woken) == 2 and woken[0] == woken[1]
    threads = [threading.Thread(target=drain, args=(runtime, [item])) for item in woken]
    threads[0].start()
    try:
        assert _eventually(lambda: len(providers.calls) == 1), "the woken step never started"
        threads[1].start()  # finds it taken: the wake-up goes to the next waiting step
        assert _eventually(lambda: sorted(providers.calls) == sorted([third, fourth]),
                           timeout_s=5), (
            f"only {providers.calls} started: the second wake-up was lost")
    finally:
        providers.go.set()
        for thread in threads:
            if thread.ident:
                thread.join(30)
    assert idle_with_answer(store, third) and idle_with_answer(store, fourth)


def test_a_step_run_where_no_slots_were_seen_yet_still_wakes_a_step_waiting_elsewhere(
    store, commands, providers
):
    """One process read the queue's slots before any worker announced them (no cap there);
    another caps the tenant and leaves a step waiting. The first one's step, ending, wakes
    it: otherwise, with no beat, it would wait for good."""
    store.slots.announce("elsewhere:1", {"agentq.model": 2}, now=T0, ttl_s=3600)
    capped = Runtime(store=store, registry=Registry([]), pubsub=Recorder(),
                     config=Config(lease_s=LEASE_S), clock=Clock(), sleep=lambda s: None,
                     rules=Rules(providers=providers, queues=queue_of))
    first, first_follow = posted(commands)
    hold_a_slot(store, first, capped.clock)
    waiting, follow = posted(commands)
    assert drain(capped, follow) == []
    assert llm_step(store, waiting).status == "waiting"  # the fair share of 2 slots is 1
    store.slots.withdraw("elsewhere:1")
    uncapped = Runtime(store=store, registry=Registry([]), pubsub=Recorder(),
                       config=Config(lease_s=LEASE_S), clock=Clock(), sleep=lambda s: None,
                       rules=Rules(providers=providers, queues=queue_of))
    finish(store, first, "elsewhere", worker="elsewhere")
    third, third_follow = posted(commands)
    woken = drain(uncapped, third_follow)  # runs uncapped, and wakes the waiting one at its end
    assert idle_with_answer(store, third)
    assert woken == [] and idle_with_answer(store, waiting)


def test_the_sweeper_wakes_a_waiting_step_once_a_dead_workers_lease_runs_out(store, runtime, commands):
    first, _ = posted(commands)
    hold_a_slot(store, first, runtime.clock)
    second, follow = posted(commands)
    drain(runtime, follow)
    assert llm_step(store, second).status == "waiting"
    assert Advance(second) not in runtime.sweep()  # the slot is still held
    runtime.clock.tick(LEASE_S + 1)
    assert Advance(second) in runtime.sweep()
    drain(runtime, runtime.sweep())
    assert idle_with_answer(store, second)


def test_ending_a_conversation_cancels_its_waiting_step_so_it_keeps_no_place(store, runtime, commands):
    first, _ = posted(commands)
    hold_a_slot(store, first, runtime.clock)
    ended, follow = posted(commands)
    drain(runtime, follow)
    later, follow = posted(commands)
    drain(runtime, follow)
    commands.end(ended, SCOPE)
    assert llm_step(store, ended).status == "cancelled"
    runtime.clock.tick(LEASE_S + 1)
    drain(runtime, runtime.sweep())
    assert idle_with_answer(store, later)


def _eventually(condition, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


# the default share: of one queue's announced slots, counting that queue's kinds only


def test_a_cap_by_kind_counts_only_the_tenants_steps_of_those_kinds(store):
    cid = conversation(store)
    assert claim(store, cid, "model", cap=None).status == "running"
    tool = NewStep("t1", cid, "tool", {"tool_call_id": "c1"}, None, "task-t1", "acme")
    taken = store.steps.schedule_and_claim(tool, worker="w1", lease_s=LEASE_S, now=at(1),
                                           max_attempts=5, cap=1, cap_kinds=("tool",))
    assert taken.status == "running"  # the running model step is not one of its queue's
    second = NewStep("t2", cid, "tool", {"tool_call_id": "c2"}, None, "task-t2", "acme")
    assert store.steps.schedule_and_claim(second, worker="w1", lease_s=LEASE_S, now=at(2),
                                          max_attempts=5, cap=1, cap_kinds=("tool",)
                                          ).status == "waiting"


def test_announced_slots_count_per_queue_until_they_expire_or_are_withdrawn(store):
    store.slots.announce("h:1", {"agentq.tools": 4, "agentq.model": 1}, now=at(0), ttl_s=30)
    store.slots.announce("h:2", {"agentq.tools": 2}, now=at(0), ttl_s=60)
    assert store.slots.load_per_queue(now=at(10)) == {"agentq.tools": 6, "agentq.model": 1}
    assert store.slots.load_per_queue(now=at(45)) == {"agentq.tools": 2}
    store.slots.withdraw("h:2")
    assert store.slots.load_per_queue(now=at(10)) == {"agentq.tools": 4, "agentq.model": 1}


def test_with_no_policy_a_tenant_filling_a_queue_leaves_the_reserve_and_then_shares_it(store):
    shares = Shares(store, lambda: at(5), lambda tenant: None)
    store.slots.announce("h:1", {"agentq.tools": 4}, now=at(0), ttl_s=30)
    assert shares.cap("acme", "tool", "agentq.tools") == (3, ("tool",))
    # no slots announced there: no cap, but the kinds whose waiting steps its end wakes
    assert shares.cap("acme", "llm", "agentq.model") == (None, ("llm", "compact"))
    globex = conversation(store, "globex")
    step = NewStep("g1", globex, "tool", {"tool_call_id": "c1"}, None, "task-g1", "globex")
    store.steps.schedule_and_claim(step, worker="w1", lease_s=LEASE_S, now=at(5), max_attempts=5)
    fresh = Shares(store, lambda: at(5), lambda tenant: None)
    assert fresh.cap("acme", "tool", "agentq.tools") == (2, ("tool",))


def test_an_operators_cap_is_kept_as_it_is_across_all_kinds(store):
    shares = Shares(store, lambda: at(5), lambda tenant: 7)
    store.slots.announce("h:1", {"agentq.tools": 4}, now=at(0), ttl_s=30)
    assert shares.cap("acme", "tool", "agentq.tools") == (7, None)


def test_the_next_waiting_step_of_another_tenant_on_the_same_kinds_is_found_for_a_freed_slot(store):
    acme, globex = conversation(store, "acme"), conversation(store, "globex")
    assert claim(store, acme, "a1", cap=1, kind="tool").status == "running"
    assert claim(store, acme, "a2", cap=1, kind="tool", seconds=1).status == "waiting"
    assert claim(store, globex, "g1", cap=0, tenant="globex", kind="llm", seconds=2).status == "waiting"
    assert store.backlog.next_waiting_step("globex", ("tool",), others=True)[0].step_key == "a2"
    assert store.backlog.next_waiting_step("acme", ("tool",), others=True) is None
    assert store.backlog.next_waiting_step("acme", ("llm",), others=True)[0].step_key == "g1"


def test_a_freed_slot_reads_the_tenants_next_waiting_step_and_another_tenants_in_one_go(store):
    acme, globex = conversation(store, "acme"), conversation(store, "globex")
    assert claim(store, acme, "a1", cap=1, kind="tool").status == "running"
    assert claim(store, acme, "a2", cap=1, kind="tool", seconds=1).status == "waiting"
    assert claim(store, acme, "a3", cap=1, kind="tool", seconds=2).status == "waiting"
    assert claim(store, globex, "g1", cap=0, tenant="globex", kind="tool", seconds=3
                 ).status == "waiting"
    assert claim(store, globex, "g2", cap=0, tenant="globex", kind="llm", seconds=4
                 ).status == "waiting"
    woken = store.backlog.next_waiting_steps("globex", ("tool",))
    assert [(step.step_key, tool) for step, tool in woken] == [("g1", None), ("a2", None)]
    assert [s.step_key for s, _ in store.backlog.next_waiting_steps("acme", ("tool",))] == ["a2", "g1"]
    assert [s.step_key for s, _ in store.backlog.next_waiting_steps("acme", ("llm",))] == ["g2"]
    assert [s.step_key for s, _ in store.backlog.next_waiting_steps("acme", None)] == ["a2"]
    assert store.backlog.next_waiting_steps("initech", None) == []


def test_a_steps_queue_is_its_kinds_unless_its_tool_names_one_of_its_own():
    own = {"crawl": "agentq.crawl"}
    assert [queue_of("llm", None, own), queue_of("compact", None, own)] == [MODEL, MODEL]
    assert [queue_of("tool", "lookup", own), queue_of("tool", "crawl", own)] == [TOOLS, "agentq.crawl"]
