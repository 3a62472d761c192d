"""Schedules in the store, on both backends: a slot is recorded once however many ticks race
for it, a tick that read a stale next slot writes nothing, a run finishes once."""
from __future__ import annotations

import threading
from dataclasses import replace
from datetime import timedelta

from agentq.store.schedules import ScheduleRecord, ScheduleRun
from tests.support.clock import T0


def schedule(sid="s1", tenant="acme", next_at=T0) -> ScheduleRecord:
    return ScheduleRecord(
        id=sid, tenant=tenant, name="nightly", cron=None, timezone=None, every_s=2.0,
        action="start", agent="helper", conversation_id=None, message="hello",
        catch_up={"mode": "skip", "max_slots": 1, "max_age_s": None},
        approvals={"mode": "wait", "expire_after_s": None}, paused=False, next_at=next_at,
        created_at=T0, updated_at=T0)


def run(slot, sid="s1") -> ScheduleRun:
    return ScheduleRun(schedule_id=sid, slot_at=slot, tenant="acme", conversation_id=f"c-{slot}",
                       message_id=None, status="due", error=None, created_at=T0, fired_at=None)


def test_a_schedule_round_trips_and_is_invisible_to_another_tenant(store):
    assert store.schedules.add(schedule(), max_per_tenant=5)
    assert store.schedules.load("s1") == schedule()
    assert store.schedules.load("s1", tenant="evil") is None
    assert store.schedules.list_for("evil") == [] and len(store.schedules.list_for("acme")) == 1


def test_a_tenant_at_its_limit_adds_no_schedule(store):
    assert store.schedules.add(schedule("s1"), max_per_tenant=1)
    assert not store.schedules.add(schedule("s2"), max_per_tenant=1)
    assert store.schedules.add(schedule("s3", tenant="other"), max_per_tenant=1)
    assert [s.id for s in store.schedules.list_for("acme")] == ["s1"]


def test_a_tick_that_read_a_stale_next_slot_records_nothing(store):
    store.schedules.add(schedule(), max_per_tenant=5)
    slot, later = T0, T0 + timedelta(seconds=2)
    assert store.schedules.fire_slots("s1", from_next_at=slot, to_next_at=later, runs=[run(slot)], now=T0)
    assert not store.schedules.fire_slots("s1", from_next_at=slot, to_next_at=later,
                                          runs=[run(slot), run(later)], now=T0)
    assert [r.slot_at for r in store.schedules.list_runs("s1", limit=10)] == [slot]
    assert store.schedules.load("s1").next_at == later


def test_a_slot_is_recorded_once_whatever_races_for_it(store):
    """Eight ticks at once, each as if it had read the next slot before the others moved it."""
    store.schedules.add(schedule(), max_per_tenant=5)
    slots = [T0 + timedelta(seconds=2 * k) for k in range(4)]
    won = []
    start = threading.Barrier(8)

    def tick(k):
        start.wait()
        for n, slot in enumerate(slots):
            following = slot + timedelta(seconds=2)
            if store.schedules.fire_slots("s1", from_next_at=slot, to_next_at=following,
                                          runs=[run(slot)], now=T0):
                won.append((k, n))

    threads = [threading.Thread(target=tick, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(n for _, n in won) == [0, 1, 2, 3]
    assert sorted(r.slot_at for r in store.schedules.list_runs("s1", limit=10)) == slots


def test_the_same_slot_written_twice_keeps_the_first_row(store):
    store.schedules.add(schedule(), max_per_tenant=5)
    store.schedules.fire_slots("s1", from_next_at=T0, to_next_at=T0 + timedelta(seconds=2),
                               runs=[run(T0)], now=T0)
    store.schedules.set_paused("s1", tenant="acme", paused=False, now=T0, next_at=T0)
    assert store.schedules.fire_slots("s1", from_next_at=T0, to_next_at=T0 + timedelta(seconds=2),
                                      runs=[replace(run(T0), conversation_id="other")], now=T0)
    (only,) = store.schedules.list_runs("s1", limit=10)
    assert only.conversation_id == f"c-{T0}"


def test_a_run_finishes_once(store):
    store.schedules.add(schedule(), max_per_tenant=5)
    store.schedules.fire_slots("s1", from_next_at=T0, to_next_at=T0 + timedelta(seconds=2),
                               runs=[run(T0)], now=T0)
    assert [r.slot_at for r in store.schedules.list_unfired(now=T0, limit=10)] == [T0]
    assert store.schedules.finish_run("s1", T0, status="fired", now=T0, message_id="m1")
    assert not store.schedules.finish_run("s1", T0, status="failed", now=T0, error="late")
    (done,) = store.schedules.list_runs("s1", limit=10)
    assert (done.status, done.message_id, done.error) == ("fired", "m1", None)
    assert store.schedules.list_unfired(now=T0, limit=10) == []


def test_a_paused_schedule_is_not_due_and_records_no_slot(store):
    store.schedules.add(schedule(), max_per_tenant=5)
    assert [s.id for s in store.schedules.list_due(now=T0, limit=10)] == ["s1"]
    assert store.schedules.set_paused("s1", tenant="acme", paused=True, now=T0)
    assert not store.schedules.set_paused("s1", tenant="evil", paused=False, now=T0)
    assert store.schedules.list_due(now=T0, limit=10) == []
    assert not store.schedules.fire_slots("s1", from_next_at=T0, to_next_at=T0 + timedelta(seconds=2),
                                          runs=[run(T0)], now=T0)


def test_deleting_a_schedule_removes_its_runs_and_only_its_owner_can(store):
    store.schedules.add(schedule(), max_per_tenant=5)
    store.schedules.fire_slots("s1", from_next_at=T0, to_next_at=T0 + timedelta(seconds=2),
                               runs=[run(T0)], now=T0)
    assert not store.schedules.delete("s1", tenant="evil")
    assert store.schedules.delete("s1", tenant="acme")
    assert store.schedules.load("s1") is None and store.schedules.list_runs("s1", limit=10) == []


def test_a_failed_attempt_is_counted_and_the_run_waits_for_its_retry(store):
    store.schedules.add(schedule(), max_per_tenant=5)
    store.schedules.fire_slots("s1", from_next_at=T0, to_next_at=T0 + timedelta(seconds=2),
                               runs=[run(T0)], now=T0)
    later = T0 + timedelta(seconds=30)
    assert store.schedules.retry_run("s1", T0, error="OperationalError: gone", retry_at=later)
    assert store.schedules.list_unfired(now=later - timedelta(microseconds=1), limit=10) == []
    (waiting,) = store.schedules.list_unfired(now=later, limit=10)
    assert (waiting.attempts, waiting.retry_at, waiting.error) == (1, later, "OperationalError: gone")
    assert store.schedules.finish_run("s1", T0, status="given_up", now=later, error="given up")
    (done,) = store.schedules.list_runs("s1", limit=10)
    assert (done.status, done.attempts, done.retry_at) == ("given_up", 2, None)
    assert not store.schedules.retry_run("s1", T0, error="late", retry_at=later)
