"""The steps ledger (DESIGN section 5): schedule, claim, heartbeat, release, finish.

Every transition is one conditional UPDATE, so a claimant that lost a race changes
nothing and learns it from the row count.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import Connection, Row, and_, bindparam, delete, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from agentq.core.decide import Step
from agentq.store.engine import insert_ignoring, param
from agentq.store.schema import record_from_row, record_values, steps

CLAIMABLE = ("scheduled", "failed_recoverable")
RELEASE_STATUSES = ("failed_recoverable", "failed_permanent", "timeout", "cancelled")
FINISHED = ("succeeded", "cancelled", "failed_permanent", "timeout")


@dataclass(frozen=True)
class NewStep:
    """What scheduling a step writes: the step, its conversation, and the task that runs it."""

    step_key: str
    conversation_id: str
    kind: str
    ref: dict[str, Any]
    round_id: str | None
    celery_task_id: str

    @classmethod
    def of(cls, step: Step, conversation_id: str, celery_task_id: str) -> NewStep:
        return cls(step.key, conversation_id, step.kind, step.ref, step.round_id, celery_task_id)


@dataclass(frozen=True)
class StepRecord:
    """A row of the ledger."""

    step_key: str
    conversation_id: str
    kind: str
    ref: dict[str, Any]
    status: str
    attempts: int
    lease_until: datetime | None
    worker: str | None
    celery_task_id: str | None
    round_id: str | None
    last_error: str | None
    retries: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


def step_from_row(row: Row[Any]) -> StepRecord:
    return record_from_row(StepRecord, row)


def schedule_step_txn(conn: Connection, step: NewStep, *, now: datetime) -> bool:
    values = {**record_values(step), "status": "scheduled", "created_at": now}
    # inv. 5: the step key is the primary key, so scheduling twice is a no-op.
    result = conn.execute(insert_ignoring(conn.dialect, steps), values)
    return result.rowcount == 1


def _claimable(now: datetime) -> Any:
    """Waiting, or running under a lease that ran out before `now`."""
    c = steps.c
    return or_(c.status.in_(CLAIMABLE), and_(c.status == "running", c.lease_until < now))


def schedule_and_claim_step_txn(
    conn: Connection, step: NewStep, *, worker: str, lease_s: float, now: datetime,
    max_attempts: int,
) -> StepRecord | None:
    """Insert the step already claimed, or claim the existing row: one upsert, one round trip.

    It is the only way a step is claimed: the conflict branch takes a row that is
    scheduled, failed_recoverable or running under a lapsed lease, with attempts left;
    a step running under a live lease, finished, or used up returns no row.
    """
    values = {**record_values(step), "worker": worker, "lease_until": now + timedelta(seconds=lease_s)}
    params = {"new_" + name: value for name, value in values.items()}
    params.update(now=now, max_attempts=max_attempts)
    row = conn.execute(_schedule_and_claim(conn.dialect.name), params).first()
    return None if row is None else step_from_row(row)


@cache
def _schedule_and_claim(dialect_name: str) -> Any:
    c = steps.c
    now = param(c.started_at, "now")
    module = postgresql if dialect_name == "postgresql" else sqlite
    given = (c.step_key, c.conversation_id, c.kind, c.ref, c.round_id, c.celery_task_id,
             c.worker, c.lease_until)
    values = {column.name: param(column, "new_" + column.name) for column in given}
    values.update(status="running", attempts=1, created_at=now, started_at=now)
    statement = module.insert(steps).values(values)
    new = statement.excluded
    return statement.on_conflict_do_update(
        index_elements=[c.step_key],
        set_={
            "status": "running",
            "lease_until": new.lease_until,
            "attempts": c.attempts + 1,
            "worker": new.worker,
            "started_at": new.started_at,
            "celery_task_id": new.celery_task_id,  # the task running it now
        },
        where=and_(c.attempts < bindparam("max_attempts"), _claimable(now)),
    ).returning(*c)


def give_up_step_txn(conn: Connection, step_key: str, *, max_attempts: int, now: datetime) -> bool:
    """Mark a claimable step whose attempts are used up failed_permanent; True for one caller."""
    c = steps.c
    result = conn.execute(
        update(steps)
        .where(c.step_key == step_key, c.attempts >= max_attempts, _claimable(now))
        .values(
            status="failed_permanent",
            lease_until=None,
            finished_at=now,
            last_error=f"gave up after {max_attempts} attempts",
        )
    )
    return result.rowcount == 1


def _owned(step_key: str, worker: str) -> Any:
    c = steps.c
    return and_(c.step_key == step_key, c.status == "running", c.worker == worker)


def heartbeat_step_txn(
    conn: Connection, step_key: str, *, worker: str, lease_s: float, now: datetime
) -> bool:
    result = conn.execute(
        update(steps)
        .where(_owned(step_key, worker))
        .values(lease_until=now + timedelta(seconds=lease_s))
    )
    return result.rowcount == 1


def release_step_txn(
    conn: Connection, step_key: str, *, worker: str, status: str, now: datetime, error: str | None
) -> bool:
    if status not in RELEASE_STATUSES:
        raise ValueError(f"a step cannot be released as {status!r}")
    values: dict[str, Any] = {"status": status, "lease_until": None, "last_error": error}
    if status in FINISHED:
        values["finished_at"] = now
    result = conn.execute(update(steps).where(_owned(step_key, worker)).values(**values))
    return result.rowcount == 1


def hold_step_txn(
    conn: Connection, step_key: str, *, until: datetime, reason: str, worker: str | None
) -> bool:
    """Hold a scheduled step until `until` (it waits on a provider's circuit breaker).

    Its `lease_until` says when: the sweeper leaves it be until then. With `worker`, the
    running step is given back by that worker first, and the attempt it used is not counted.
    True when the hold moved later (its re-drive is due at `until`).
    """
    c = steps.c
    values: dict[str, Any] = {"status": "scheduled", "lease_until": until, "last_error": reason}
    if worker is not None:
        where = _owned(step_key, worker)
        values.update(worker=None, attempts=c.attempts - 1)
    else:
        where = and_(c.step_key == step_key, c.status.in_(CLAIMABLE),
                     or_(c.lease_until.is_(None), c.lease_until < until))
    return conn.execute(update(steps).where(where).values(**values)).rowcount == 1


def finish_step_txn(
    conn: Connection, conversation_id: str, step_key: str, *, worker: str, now: datetime
) -> bool:
    params = {"key": step_key, "by": worker, "cid": conversation_id, "now": now}
    return conn.execute(_FINISH, params).rowcount == 1


_FINISH = (
    update(steps)
    .where(
        steps.c.step_key == param(steps.c.step_key, "key"),
        steps.c.status == "running",
        steps.c.worker == param(steps.c.worker, "by"),
        steps.c.conversation_id == param(steps.c.conversation_id, "cid"),
    )
    .values(status="succeeded", finished_at=param(steps.c.finished_at, "now"), lease_until=None)
)


def add_step_retry_txn(conn: Connection, step_key: str) -> None:
    conn.execute(
        update(steps).where(steps.c.step_key == step_key).values(retries=steps.c.retries + 1)
    )


def load_step_txn(conn: Connection, step_key: str) -> StepRecord | None:
    row = conn.execute(select(steps).where(steps.c.step_key == step_key)).first()
    return None if row is None else step_from_row(row)


def list_steps_txn(conn: Connection, conversation_id: str) -> list[StepRecord]:
    c = steps.c
    query = (
        select(steps)
        .where(c.conversation_id == conversation_id)
        .order_by(c.created_at, c.step_key)
    )
    return [step_from_row(row) for row in conn.execute(query)]


def list_stale_steps_txn(
    conn: Connection, *, now: datetime, scheduled_before: datetime, limit: int
) -> list[StepRecord]:
    c = steps.c
    expired = and_(c.status == "running", c.lease_until < now)
    waiting = and_(c.status.in_(CLAIMABLE), c.created_at < scheduled_before,
                   or_(c.lease_until.is_(None), c.lease_until < now))  # not held (hold_step)
    query = (
        select(steps)
        .where(or_(expired, waiting))
        .order_by(c.created_at, c.step_key)
        .limit(limit)
    )
    return [step_from_row(row) for row in conn.execute(query)]


def delete_finished_steps_txn(conn: Connection, *, finished_before: datetime) -> int:
    c = steps.c
    result = conn.execute(
        delete(steps).where(c.status.in_(FINISHED), c.finished_at < finished_before)
    )
    return result.rowcount


def cancel_open_steps_txn(
    conn: Connection, conversation_id: str, *, kinds: tuple[str, ...], now: datetime
) -> list[StepRecord]:
    """Cancel every unfinished step of these kinds; a worker still running one loses it.

    Its heartbeat then finds the step no longer ours and closes the stream, and its
    commit (which needs the step to be `running` and its own) can no longer land.
    """
    c = steps.c
    open_steps = and_(
        c.conversation_id == conversation_id,
        c.kind.in_(kinds),
        c.status.in_((*CLAIMABLE, "running")),
    )
    rows = [step_from_row(row) for row in conn.execute(select(steps).where(open_steps))]
    if rows:
        conn.execute(
            update(steps)
            .where(c.step_key.in_([r.step_key for r in rows]), open_steps)
            .values(status="cancelled", lease_until=None, finished_at=now,
                    last_error="cancelled by an interrupt")
        )
    return rows
