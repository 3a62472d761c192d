"""Each claim of a step is kept on its row (`steps.attempt_log`), in the statement that claims
it, so a turn's timeline shows every attempt, its worker, and how it ended."""
from __future__ import annotations

from datetime import timedelta

from agentq.core.timeline import attempts_of
from agentq.store import NewStep, Store
from agentq.store.engine import begin_read
from agentq.store.timeline import _steps_txn
from tests.store.test_store import new_conversation
from tests.support.clock import T0


def claim(store: Store, cid: str, worker: str, seconds: float, *, cap: int | None = None):
    step = NewStep("k1", cid, "llm", {"after_seq": 1}, "r1", "task-k1", "acme")
    return store.steps.schedule_and_claim(step, worker=worker, lease_s=30,
                                          now=T0 + timedelta(seconds=seconds), max_attempts=5,
                                          cap=cap)


def rows(store: Store):
    with begin_read(store.engine) as conn:
        return _steps_txn(conn, ["k1"])


def test_a_step_taken_over_after_its_worker_died_keeps_both_attempts(store):
    cid = new_conversation(store).id
    claim(store, cid, "w1", 0)
    claim(store, cid, "w2", 31)  # w1's lease ran out at 30
    [row] = rows(store)
    assert [entry["worker"] for entry in row.attempt_log] == ["w1", "w2"]
    attempts = attempts_of(row, now=T0 + timedelta(seconds=32))
    assert [(a.worker, a.outcome) for a in attempts] == [("w1", "died"), ("w2", "running")]
    assert attempts[1].claimed_at == T0 + timedelta(seconds=31)


def test_a_step_released_to_retry_then_done_shows_retried_then_done(store):
    cid = new_conversation(store).id
    claim(store, cid, "w1", 0)
    assert store.steps.release("k1", worker="w1", status="failed_recoverable",
                               now=T0 + timedelta(seconds=1), error="boom", fault=True)
    claim(store, cid, "w2", 2)
    store.steps.release("k1", worker="w2", status="failed_permanent",
                        now=T0 + timedelta(seconds=3), error="boom again", fault=True)
    [row] = rows(store)
    attempts = attempts_of(row, now=T0 + timedelta(seconds=4))
    assert [(a.number, a.worker, a.outcome, a.error) for a in attempts] == [
        (1, "w1", "retried", "boom"), (2, "w2", "given_up", "boom again")]
    assert attempts[1].ended_at == T0 + timedelta(seconds=3)


def test_a_claim_that_waits_for_a_slot_logs_no_attempt_until_it_runs(store):
    cid = new_conversation(store).id
    other = NewStep("k0", cid, "llm", {"after_seq": 0}, "r0", "task-k0", "acme")
    store.steps.schedule_and_claim(other, worker="w0", lease_s=30, now=T0, max_attempts=5, cap=1)
    assert claim(store, cid, "w1", 1, cap=1).status == "waiting"
    assert rows(store)[0].attempt_log == ()
    store.steps.release("k0", worker="w0", status="cancelled", now=T0 + timedelta(seconds=2))
    claim(store, cid, "w1", 3, cap=1)
    [row] = rows(store)
    assert [(e["worker"], e["after"]) for e in row.attempt_log] == [("w1", "waiting")]
