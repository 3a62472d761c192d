"""The sweeper's reads, and its own connection: a PostgreSQL advisory lock lets one sweeper
run at a time.

The lock is a session lock, so it goes when its holder does: a killed process's
connection closes, and the server ends a session that sat idle past `idle_s` (a holder
that is paused, partitioned or hung), so another candidate takes over within that. The
holder reads its deadlines on this connection: an error there means the lock may be gone,
and the caller opens a new one. SQLite has one writer process; every candidate leads.
"""
from __future__ import annotations

import contextlib
from datetime import datetime

import sqlalchemy
from sqlalchemy import Connection, Engine, text
from sqlalchemy.pool import NullPool

from agentq.core.events import ToolCallRecord
from agentq.store import dialects
from agentq.store.deadlines import (
    Deadlines,
    list_calls_due_txn,
    list_lapsed_steps_txn,
    next_deadlines_txn,
)
from agentq.store.dialects import Dialect
from agentq.store.engine import begin_read
from agentq.store.ledger import StepRecord

# pg_try_advisory_lock(bigint) keys do not meet the (int, int) keys of tenants' claims.
SWEEPER_LOCK_KEY = int.from_bytes(b"agtqswep", "big", signed=True)


class SweeperLock:
    """A candidate's hold on the sweeper lock, and its reads while it leads."""

    def __init__(self, engine: Engine, *, idle_s: float) -> None:
        self._engine = engine
        self._idle_s = idle_s
        self._conn: Connection | None = None
        self.held = False

    def acquire(self) -> bool:
        """Take the lock if free; True while this candidate holds it (one statement a try)."""
        if self.held:
            return True
        if not dialects.of(self._engine).server_locks:
            self.held = True
            return True
        if self._conn is None:  # a connection of its own: it never takes one from the pool
            own = sqlalchemy.create_engine(self._engine.url, poolclass=NullPool)
            self._conn = own.connect().execution_options(isolation_level="AUTOCOMMIT")
            idle_ms = int(self._idle_s * 1000)
            self._conn.exec_driver_sql(f"SET idle_session_timeout = {idle_ms}")
        got = self._conn.execute(text("SELECT pg_try_advisory_lock(:key)"),
                                 {"key": SWEEPER_LOCK_KEY}).scalar()
        self.held = bool(got)
        return self.held

    def next_deadlines(
        self, *, lease_after: datetime, hold_after: datetime, call_after: datetime
    ) -> Deadlines:
        """The earliest lease, hold and call deadline after the times given (one statement)."""
        if self._conn is None:
            with begin_read(self._engine, one_snapshot=False) as conn:
                return next_deadlines_txn(conn, lease_after=lease_after, hold_after=hold_after,
                                          call_after=call_after)
        return next_deadlines_txn(self._conn, lease_after=lease_after, hold_after=hold_after,
                                  call_after=call_after)

    def close(self) -> None:
        """Give the lock up, and end the session."""
        self.held = False
        conn, self._conn = self._conn, None
        if conn is None:
            return
        # at once: a closed session's locks go only when the server has noticed; if the
        # session is gone already, its lock went with it
        with contextlib.suppress(Exception):
            conn.execute(text("SELECT pg_advisory_unlock_all()"))
        conn.close()
        conn.engine.dispose()


class Sweeps:
    """What the sweeper reads: what fell due in a window, and the lock to lead by."""

    def __init__(self, engine: Engine, dialect: Dialect) -> None:
        self._engine = engine
        self._dialect = dialect

    def list_lapsed_steps(
        self, *, lease_after: datetime, hold_after: datetime, lease_now: datetime,
        hold_now: datetime, limit: int = 100,
    ) -> list[tuple[StepRecord, str | None]]:
        """Steps whose lease ran out, or whose hold ended, within the windows given."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return list_lapsed_steps_txn(conn, lease_after=lease_after, hold_after=hold_after,
                                         lease_now=lease_now, hold_now=hold_now, limit=limit)

    def list_calls_due(
        self, *, after: datetime, now: datetime, limit: int = 100
    ) -> list[ToolCallRecord]:
        """Pending calls whose deadline came in (after, now], soonest first."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return list_calls_due_txn(conn, after=after, now=now, limit=limit)

    def lock(self, *, idle_s: float) -> SweeperLock:
        """A candidate's hold on the sweeper lock (one sweeper at a time per database)."""
        return SweeperLock(self._engine, idle_s=idle_s)
