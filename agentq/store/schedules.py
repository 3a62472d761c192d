"""Schedules and their runs, as the store holds them.

A tick fires a schedule's slots in one transaction (`fire_slots`): it moves the schedule's
`next_at` only from the value it read, and inserts one `schedule_runs` row per slot, whose
primary key is (schedule, slot). Two tickers that read the same `next_at` both try; one
moves it and writes the rows, the other changes nothing. A run row is written `due` and
becomes `fired` once its conversation or message exists (`finish_run`, conditional too),
so a ticker that dies in between leaves a `due` row that the next tick runs again, under
the same derived ids (agentq.core.schedules).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, delete, func, select, update

from agentq.store.dialects import Dialect
from agentq.store.engine import begin_read, begin_write
from agentq.store.schedule_tables import schedule_runs, schedules
from agentq.store.schema import record_from_row, record_values


@dataclass(frozen=True)
class ScheduleRecord:
    """A tenant's schedule: `cron` + `timezone`, or `every_s`; `action` is `start` (a new
    conversation from `agent`) or `post` (into `conversation_id`)."""

    id: str
    tenant: str
    name: str
    cron: str | None
    timezone: str | None
    every_s: float | None
    action: str
    agent: str | None
    conversation_id: str | None
    message: Any
    catch_up: dict[str, Any]
    approvals: dict[str, Any]
    paused: bool
    next_at: datetime
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class ScheduleRun:
    """One fired slot: the conversation its run started or posted to."""

    schedule_id: str
    slot_at: datetime
    tenant: str
    conversation_id: str
    message_id: str | None
    status: str  # due, fired, failed, given_up
    error: str | None
    created_at: datetime
    fired_at: datetime | None
    attempts: int = 0  # how often a tick tried to carry it out
    retry_at: datetime | None = None  # after a failed attempt: not tried again before then


class Schedules:
    """The schedules of every tenant and the runs of their slots."""

    def __init__(self, engine: Engine, dialect: Dialect) -> None:
        self._engine = engine
        self._dialect = dialect

    def add(self, record: ScheduleRecord, *, max_per_tenant: int) -> bool:
        """Insert the schedule unless its tenant already has `max_per_tenant`; False then."""
        s = schedules.c
        with begin_write(self._engine) as conn:
            count = conn.execute(select(func.count()).where(s.tenant == record.tenant)).scalar_one()
            if count >= max_per_tenant:
                return False
            conn.execute(schedules.insert(), [record_values(record)])
        return True

    def list_for(self, tenant: str) -> list[ScheduleRecord]:
        s = schedules.c
        with begin_read(self._engine, one_snapshot=False) as conn:
            rows = conn.execute(select(schedules).where(s.tenant == tenant)
                                .order_by(s.created_at, s.id))
            return [record_from_row(ScheduleRecord, row) for row in rows]

    def load(self, schedule_id: str, *, tenant: str | None = None) -> ScheduleRecord | None:
        """The schedule, or None if absent or another `tenant`'s."""
        s = schedules.c
        with begin_read(self._engine, one_snapshot=False) as conn:
            row = conn.execute(select(schedules).where(s.id == schedule_id)).first()
        found = None if row is None else record_from_row(ScheduleRecord, row)
        if found is None or (tenant is not None and found.tenant != tenant):
            return None
        return found

    def set_paused(self, schedule_id: str, *, tenant: str, paused: bool, now: datetime,
                   next_at: datetime | None = None) -> bool:
        """Pause or resume the tenant's schedule (resuming from `next_at`); False if none."""
        s = schedules.c
        values: dict[str, Any] = {"paused": paused, "updated_at": now}
        if next_at is not None:
            values["next_at"] = next_at
        with begin_write(self._engine) as conn:
            done = conn.execute(update(schedules).where(s.id == schedule_id, s.tenant == tenant)
                                .values(**values))
            return done.rowcount == 1

    def delete(self, schedule_id: str, *, tenant: str) -> bool:
        """Remove the schedule and the record of its runs (their conversations stay)."""
        s, r = schedules.c, schedule_runs.c
        with begin_write(self._engine) as conn:
            owned = select(s.id).where(s.id == schedule_id, s.tenant == tenant).scalar_subquery()
            conn.execute(delete(schedule_runs).where(r.schedule_id == owned))
            done = conn.execute(delete(schedules).where(s.id == schedule_id, s.tenant == tenant))
            return done.rowcount == 1

    def list_due(self, *, now: datetime, limit: int) -> list[ScheduleRecord]:
        """Unpaused schedules whose next slot is at or before `now`, the most overdue first."""
        s = schedules.c
        with begin_read(self._engine, one_snapshot=False) as conn:
            rows = conn.execute(select(schedules).where(s.paused.is_(False), s.next_at <= now)
                                .order_by(s.next_at, s.id).limit(limit))
            return [record_from_row(ScheduleRecord, row) for row in rows]

    def fire_slots(self, schedule_id: str, *, from_next_at: datetime, to_next_at: datetime,
                   runs: Sequence[ScheduleRun], now: datetime) -> bool:
        """Move the schedule's next slot from `from_next_at` to `to_next_at` and record
        `runs` as due, all or nothing; False (and nothing written) if another tick moved it
        first or the schedule was paused or deleted meanwhile."""
        s = schedules.c
        with begin_write(self._engine) as conn:
            moved = conn.execute(update(schedules).where(
                s.id == schedule_id, s.next_at == from_next_at, s.paused.is_(False),
            ).values(next_at=to_next_at, updated_at=now))
            if moved.rowcount != 1:
                return False
            if runs:  # the key (schedule, slot) keeps a slot once, whatever raced
                conn.execute(self._dialect.insert_ignoring(schedule_runs),
                             [record_values(run) for run in runs])
        return True

    def list_unfired(self, *, now: datetime, limit: int) -> list[ScheduleRun]:
        """Runs recorded but not yet carried out, oldest first, without those waiting to
        be tried again after a failed attempt."""
        r = schedule_runs.c
        with begin_read(self._engine, one_snapshot=False) as conn:
            rows = conn.execute(select(schedule_runs)
                                .where(r.status == "due", (r.retry_at.is_(None)) | (r.retry_at <= now))
                                .order_by(r.created_at, r.schedule_id, r.slot_at).limit(limit))
            return [record_from_row(ScheduleRun, row) for row in rows]

    def finish_run(self, schedule_id: str, slot_at: datetime, *, status: str, now: datetime,
                   message_id: str | None = None, error: str | None = None) -> bool:
        """`due → fired | failed | given_up`, once, counting the attempt; False if the run
        had already finished."""
        r = schedule_runs.c
        with begin_write(self._engine) as conn:
            done = conn.execute(update(schedule_runs).where(
                r.schedule_id == schedule_id, r.slot_at == slot_at, r.status == "due",
            ).values(status=status, message_id=message_id, error=error, fired_at=now,
                     attempts=r.attempts + 1, retry_at=None))
            return done.rowcount == 1

    def retry_run(self, schedule_id: str, slot_at: datetime, *, error: str,
                  retry_at: datetime) -> bool:
        """A due run's attempt failed: count it, keep why, and wait till `retry_at`; False
        if the run had finished meanwhile (another tick carried it out)."""
        r = schedule_runs.c
        with begin_write(self._engine) as conn:
            done = conn.execute(update(schedule_runs).where(
                r.schedule_id == schedule_id, r.slot_at == slot_at, r.status == "due",
            ).values(error=error, attempts=r.attempts + 1, retry_at=retry_at))
            return done.rowcount == 1

    def list_runs(self, schedule_id: str, *, limit: int) -> list[ScheduleRun]:
        """The schedule's runs, the latest slot first."""
        r = schedule_runs.c
        with begin_read(self._engine, one_snapshot=False) as conn:
            rows = conn.execute(select(schedule_runs).where(r.schedule_id == schedule_id)
                                .order_by(r.slot_at.desc()).limit(limit))
            return [record_from_row(ScheduleRun, row) for row in rows]
