"""The steps ledger (docs/design.md §5): schedule, claim, heartbeat, release, finish.

Every transition is one conditional UPDATE, so a claimant that lost a race changes
nothing and learns it from the row count.

A step is given up after `max_attempts` faults, attempts that can be its own fault (inv.
11): it raised (a release with `fault=True`), or its worker died while it ran alone. A
worker that dies under many steps at once proves nothing about any one of them: such a
death counts in `deaths`, and a step that died ALONE_AFTER_DEATHS times in company is
claimed only by a worker that runs nothing else meanwhile (`alone=True`), so the step
that kills its workers is found among the many that died with it, and the others never
run out of attempts however often their workers are killed. A claim may also be held to its tenant's share
of the workers (`cap`): past it the step is left `waiting`, in order of arrival, and
holds no worker until a slot of its tenant frees.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Connection,
    Row,
    and_,
    case,
    delete,
    or_,
    select,
    tuple_,
    update,
)

from agentq.core.decide import Step
from agentq.store.cap_rule import WAITING
from agentq.store.engine import insert_ignoring, one_of, param
from agentq.store.schema import record_from_row, record_values, steps

READY = ("scheduled", "failed_recoverable")  # a worker may take these as soon as it gets them
CLAIMABLE = (*READY, WAITING)
RELEASE_STATUSES = ("failed_recoverable", "failed_permanent", "timeout", "cancelled")
FINISHED = ("succeeded", "cancelled", "failed_permanent", "timeout")
# Deaths in company after which a step runs alone: one may be bad luck, two make it a suspect.
ALONE_AFTER_DEATHS = 2


@dataclass(frozen=True)
class NewStep:
    """What scheduling a step writes: the step, its conversation, and the task that runs it."""

    step_key: str
    conversation_id: str
    kind: str
    ref: dict[str, Any]
    round_id: str | None
    celery_task_id: str
    tenant: str  # the conversation's, whose share of the workers the step uses

    @classmethod
    def of(cls, step: Step, conversation_id: str, celery_task_id: str, *, tenant: str) -> NewStep:
        return cls(step.key, conversation_id, step.kind, step.ref, step.round_id, celery_task_id,
                   tenant)


@dataclass(frozen=True)
class StepRecord:
    """A row of the ledger."""

    step_key: str
    conversation_id: str
    tenant: str
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
    faults: int
    deaths: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


def step_from_row(row: Row[Any]) -> StepRecord:
    return record_from_row(StepRecord, row)


def schedule_step_txn(conn: Connection, step: NewStep, *, now: datetime) -> bool:
    values = schedule_values(step, now=now)
    # inv. 5: the step key is the primary key, so scheduling twice is a no-op.
    result = conn.execute(insert_ignoring(conn, steps), values)
    return result.rowcount == 1


def claimable(now: datetime | BindParameter[Any]) -> Any:
    """Scheduled, failed_recoverable, waiting for a slot, or running under a lease that ran
    out before `now`."""
    c = steps.c
    return or_(one_of(c.status, CLAIMABLE), and_(c.status == "running", c.lease_until < now))


def _died(now: Any) -> ColumnElement[bool]:
    """The attempt under way is dead: its lease ran out while it was running."""
    c = steps.c
    return and_(c.status == "running", c.lease_until < now)


def faults_after(now: Any) -> ColumnElement[int]:
    """The step's faults, counting an attempt that died while it ran alone."""
    c = steps.c
    return c.faults + case((and_(_died(now), c.deaths >= ALONE_AFTER_DEATHS), 1), else_=0)


def deaths_after(now: Any) -> ColumnElement[int]:
    """The step's deaths in company, counting an attempt that died among others."""
    c = steps.c
    return c.deaths + case((and_(_died(now), c.deaths < ALONE_AFTER_DEATHS), 1), else_=0)


def runs_alone(step: StepRecord, *, now: datetime, max_attempts: int) -> bool:
    """True if the step is claimable with faults to spare, but only by a worker that runs it
    alone (it died in company ALONE_AFTER_DEATHS times, counting a death not yet seen)."""
    died = step.status == "running" and step.lease_until is not None and step.lease_until < now
    claimable = step.status in CLAIMABLE or died
    deaths = step.deaths + (died and step.deaths < ALONE_AFTER_DEATHS)
    faults = step.faults + (died and step.deaths >= ALONE_AFTER_DEATHS)
    return claimable and deaths >= ALONE_AFTER_DEATHS and faults < max_attempts




















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


def renew_leases_txn(
    conn: Connection, held: list[tuple[str, str]], *, lease_s: float, now: datetime
) -> set[str]:
    """Renew every (step_key, worker) lease still ours in one UPDATE; the keys renewed."""
    c = steps.c
    result = conn.execute(
        update(steps)
        .where(tuple_(c.step_key, c.worker).in_(held), c.status == "running")
        .values(lease_until=now + timedelta(seconds=lease_s))
        .returning(c.step_key)
    )
    return set(result.scalars())


def list_owned_txn(conn: Connection, held: list[tuple[str, str]]) -> set[str]:
    """The keys of `held` (step_key, worker) still running under that worker: one SELECT."""
    c = steps.c
    query = select(c.step_key).where(tuple_(c.step_key, c.worker).in_(held), c.status == "running")
    return set(conn.execute(query).scalars())


def release_step_txn(
    conn: Connection, step_key: str, *, worker: str, status: str, now: datetime, error: str | None,
    fault: bool = False,
) -> bool:
    """End our attempt with `status`; with `fault`, the attempt counts against the step."""
    if status not in RELEASE_STATUSES:
        raise ValueError(f"a step cannot be released as {status!r}")
    values: dict[str, Any] = {"status": status, "lease_until": None, "last_error": error}
    if fault:
        values["faults"] = steps.c.faults + 1
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
    return conn.execute(FINISH, finish_params(conversation_id, step_key, worker=worker, now=now)
                        ).rowcount == 1


def finish_params(conversation_id: str, step_key: str, *, worker: str, now: datetime) -> dict[str, Any]:
    return {"key": step_key, "by": worker, "cid": conversation_id, "now": now}


def schedule_values(step: NewStep, *, now: datetime) -> dict[str, Any]:
    """The row that schedules `step`."""
    return {**record_values(step), "status": "scheduled", "created_at": now}


# the running step of this worker, marked succeeded (also a part of `step_commit`'s statements)
FINISH = (
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


def cancel_waiting_steps_txn(conn: Connection, conversation_id: str, *, now: datetime) -> int:
    """Cancel the conversation's steps that wait for a slot (it ended: none of them will run)."""
    c = steps.c
    result = conn.execute(
        update(steps)
        .where(c.conversation_id == conversation_id, c.status == WAITING)
        .values(status="cancelled", finished_at=now, last_error="the conversation ended")
    )
    return result.rowcount


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
