"""Claims of steps: the one statement that schedules a step if new and claims it (under its
tenant's cap, inv. 9), and the counted faults of steps that could not be claimed (inv. 12).

Each is an upsert on the step key, so a claimant that lost a race takes nothing; the cap's
count is `agentq.store.cap_rule`, run as each dialect runs it.
"""
from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import (
    Boolean,
    ColumnElement,
    Connection,
    Integer,
    and_,
    bindparam,
    case,
    false,
    func,
    literal,
    null,
    or_,
    select,
    true,
    update,
)

from agentq.store import cap_rule, dialects
from agentq.store.cap_rule import WAITING
from agentq.store.dialects import Dialect
from agentq.store.engine import one_of, param
from agentq.store.ledger import (
    ALONE_AFTER_DEATHS,
    CLAIMABLE,
    NewStep,
    StepRecord,
    claimable,
    deaths_after,
    faults_after,
    step_from_row,
)
from agentq.store.schema import record_values, steps
from agentq.store.waits import tenant_waits


def schedule_and_claim_step_txn(
    conn: Connection, step: NewStep, *, worker: str, lease_s: float, now: datetime,
    max_attempts: int, cap: int | None = None, alone: bool = False,
    cap_kinds: tuple[str, ...] | None = None,
) -> StepRecord | None:
    """Insert the step already claimed, or claim the existing row, in one statement; None if it
    is not ours to take.

    It is the only way a step is claimed: the conflict branch takes a row that is
    scheduled, failed_recoverable, waiting or running under a lapsed lease, with faults
    left; a step running under a live lease, finished, or used up returns no row, and so
    does a step that must run alone unless the claimant runs it `alone` (`runs_alone`).
    Taking over a dead attempt counts its death: a fault if it ran alone, else a death in
    company.

    With a `cap`, the step runs only if fewer than `cap` steps of its tenant run under a
    live lease or wait ahead of it (arrived earlier); otherwise it is left `waiting`, no
    attempt counted, and the row comes back with that status (inv. 9). With `cap_kinds`,
    only the tenant's steps of those kinds count (a share of one queue's slots).

    The statement is its own transaction (`Steps.schedule_and_claim`), and its commit does
    not wait for the disk (`Dialect.flush_not_awaited`): a claim is a lease, and whatever
    the step makes durable after it is flushed after it (design.md §5, "A claim's commit").

    A claim that takes a slot records in `waited_on` whether a step of its tenant (of
    `cap_kinds`) waits for one then, capped or not, so its end reads what it wakes only if
    one may (`agentq.store.waits`); an uncapped claim with no kinds always does.
    """
    values = {**record_values(step), "worker": worker, "lease_until": now + timedelta(seconds=lease_s)}
    params = {"new_" + name: value for name, value in values.items()}
    params.update(now=now, max_attempts=max_attempts, alone=alone)
    if cap is not None:
        params.update(cap=cap)
    by_kind = cap_kinds is not None
    if cap is not None or by_kind:  # it counts under the tenant's claim lock
        params.update(lock_key=tenant_lock_key(step.tenant))
    if cap_kinds is not None:
        params.update(kinds=list(cap_kinds))
    statement = _schedule_and_claim(dialects.of(conn), capped=cap is not None, by_kind=by_kind)
    row = conn.execute(statement, params).first()
    return None if row is None else step_from_row(row)


def tenant_lock_key(tenant: str) -> int:
    """The second key of the tenant's claim lock on PostgreSQL (a signed 32-bit hash; the
    first, 0x61677471 "agtq", is agentq's, written in `agentq_slots_taken`)."""
    return int.from_bytes(hashlib.sha256(tenant.encode()).digest()[:4], "big", signed=True)


def _slots_taken(dialect: Dialect, tenant: Any, step_key: Any, now: Any, *,
                 by_kind: bool) -> ColumnElement[int]:
    """How many of the tenant's steps run under a live lease or wait ahead of this one (up to
    :cap), by the cap rule (`agentq.store.cap_rule`): counted in the claim on SQLite, which
    runs one writer at a time; on PostgreSQL by `agentq_slots_taken`, the same rule under the
    tenant's advisory lock. `by_kind`: only steps of the kinds in :kinds count."""
    cap = bindparam("cap", type_=Integer)
    mine, other = steps.alias("mine"), steps.alias("other")
    inline = cap_rule.slots_taken(
        other, tenant=tenant, step_key=step_key, now=now, cap=cap,
        arrived=cap_rule.arrival(mine, step_key=step_key, now=now),
        kinds=_in_kinds if by_kind else None).scalar_subquery()
    return dialect.slots_taken(inline, steps, tenant=tenant, step_key=step_key, now=now,
                               cap=cap, lock_key=bindparam("lock_key", type_=Integer),
                               by_kind=by_kind)


def _in_kinds(kind: ColumnElement[Any]) -> ColumnElement[bool]:
    return kind.in_(bindparam("kinds", expanding=True))


_GIVEN = ("step_key", "conversation_id", "tenant", "kind", "ref", "round_id", "celery_task_id")


@cache
def _schedule_and_claim(dialect: Dialect, *, capped: bool, by_kind: bool = False) -> Any:
    c = steps.c
    now = param(c.started_at, "now")
    values = {name: param(c[name], "new_" + name) for name in _GIVEN}
    worker = param(c.worker, "new_worker")
    claimed: dict[str, Any] = {"status": literal("running"), "worker": worker,
               "lease_until": param(c.lease_until, "new_lease_until"), "attempts": literal(1),
               "created_at": now, "started_at": now,
               "attempt_log": _attempt_logged(dialect, null(), worker, now, after=null())}
    if capped:  # claimed if a slot is free, else waiting: no worker, no lease, no attempt
        taken = _slots_taken(dialect, values["tenant"], values["step_key"], now, by_kind=by_kind)
        waits = tenant_waits(dialect, values["tenant"], by_kind=by_kind)
        slot = select((taken < bindparam("cap", type_=Integer)).label("free"),
                      waits.label("waits")).subquery("slot")
        claimed["waited_on"] = slot.c.waits  # a step of its tenant waits: wake at its end
        waiting = {"status": literal(WAITING), "attempts": literal(0), "created_at": now,
                   "waited_on": false()}
        chosen = {name: case((slot.c.free, value), else_=waiting.get(name))
                  for name, value in claimed.items()}
        row = select(*(value.label(name) for name, value in {**values, **chosen}.items()))
        statement = dialect.insert(steps).from_select(  # a WHERE, as SQLite's upsert needs
            [*values, *chosen], row.select_from(slot).where(dialect.flush_not_awaited()))
    else:
        # Uncapped here, it may hold a slot steps capped elsewhere wait for (another process
        # that sees the queue's slots, or this one in a moment): on a queue shared by default
        # (`by_kind`), it reads whether one waits as a capped claim does, under the tenant's
        # lock; with no queue known, its end reads what it wakes.
        waits = tenant_waits(dialect, values["tenant"], by_kind=True) if by_kind else true()
        given = {**values, **claimed, "waited_on": waits}
        row = select(*(value.label(name) for name, value in given.items()))
        statement = dialect.insert(steps).from_select(
            list(given), row.where(dialect.flush_not_awaited()))
    new = statement.excluded
    return statement.on_conflict_do_update(
        index_elements=[c.step_key],
        set_={
            "status": new.status,  # running, or waiting for a slot
            "lease_until": new.lease_until,
            "attempts": c.attempts + new.attempts,
            "faults": faults_after(now),
            "deaths": deaths_after(now),
            "worker": new.worker,
            "started_at": func.coalesce(new.started_at, c.started_at),
            "celery_task_id": new.celery_task_id,  # the task that took it up last
            # a claim (not a wait for a slot) notes its worker and how the last attempt ended
            "attempt_log": case((new.attempts > 0, _attempt_logged(
                dialect, c.attempt_log, new.worker, now, after=c.status, error=c.last_error)),
                else_=c.attempt_log),
            "waited_on": new.waited_on,
        },
        where=and_(faults_after(now) < bindparam("max_attempts"), claimable(now),
                   or_(deaths_after(now) < ALONE_AFTER_DEATHS,
                       bindparam("alone", type_=Boolean))),
    ).returning(*c)


def _attempt_logged(dialect: Dialect, log: Any, worker: Any, now: Any, *, after: Any,
                    error: Any = None) -> ColumnElement[Any]:
    """`log` with this claim appended: its worker, when, and the status it found the step in."""
    entry = {"worker": worker, "claimed_at": now, "after": after}
    return dialect.json_appended(log, entry if error is None else {**entry, "error": error})


def give_up_step_txn(
    conn: Connection, step_key: str, *, max_attempts: int, now: datetime
) -> StepRecord | None:
    """Mark a claimable step whose faults are used up failed_permanent; the row as given up
    for the one caller that did (its `last_error` still what it last raised), else None."""
    c = steps.c
    row = conn.execute(
        update(steps)
        .where(c.step_key == step_key, faults_after(now) >= max_attempts, claimable(now))
        .values(status="failed_permanent", lease_until=None, faults=faults_after(now),
                finished_at=now)
        .returning(*c)
    ).first()
    return None if row is None else step_from_row(row)


def fault_step_txn(conn: Connection, step: NewStep, *, error: str, now: datetime,
                   retry_at: datetime) -> StepRecord | None:
    """Count a fault of a step whose task raised before it could claim it (inv. 12), as an
    attempt that failed, scheduling the step if new, and hold it until `retry_at`: the
    sweeper re-drives it then, and the tasks that raised together meanwhile (a burst of
    re-drives) count nothing more. The row as counted; None if it counted nothing (the
    step runs, is done, or is held)."""
    params = {"new_" + name: value for name, value in record_values(step).items()}
    row = conn.execute(_fault(dialects.of(conn)),
                       {**params, "now": now, "error": error, "retry_at": retry_at}).first()
    return None if row is None else step_from_row(row)


@cache
def _fault(dialect: Dialect) -> Any:
    c = steps.c
    values = {name: param(c[name], "new_" + name) for name in _GIVEN}
    now = param(c.created_at, "now")
    statement = dialect.insert(steps).values({
        **values, "status": literal("scheduled"), "attempts": literal(1), "faults": literal(1),
        "last_error": param(c.last_error, "error"),
        "lease_until": param(c.lease_until, "retry_at"), "created_at": now})
    new = statement.excluded
    return statement.on_conflict_do_update(
        index_elements=[c.step_key],
        set_={"status": new.status, "lease_until": new.lease_until, "attempts": c.attempts + 1,
              "faults": c.faults + 1, "last_error": new.last_error},
        # not one running (that attempt is another's), nor one held (counted, or waiting on
        # its endpoint's breaker: inv. 11)
        where=and_(one_of(c.status, CLAIMABLE), or_(c.lease_until.is_(None), c.lease_until <= now)),
    ).returning(*c)
