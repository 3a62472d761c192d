"""What falls due next, for the sweeper: lapsing leases, held steps and pending calls' deadlines.

`next_deadline_txn` is one statement of three index lookups (each a MIN over
`(status, lease_until)` or `(status, expires_at)`), so a sweeper that wakes for it costs
the database next to nothing; the `list_…` helpers read what fell due in a window, so a
wake re-drives each thing once and leaves repeats to the periodic sweep.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, func, select

from agentq.core.events import ToolCallRecord
from agentq.store.backlog import steps_with_tools, with_tool
from agentq.store.calls import call_from_row
from agentq.store.ledger import StepRecord
from agentq.store.schema import steps, tool_calls


@dataclass(frozen=True)
class Deadlines:
    """The earliest of each kind still ahead of the times asked about (None: none)."""

    lease: datetime | None  # a running step's lease runs out
    hold: datetime | None  # a held step (circuit breaker) may run again
    call: datetime | None  # a pending call's deadline


def next_deadlines_txn(
    conn: Connection, *, lease_after: datetime, hold_after: datetime, call_after: datetime
) -> Deadlines:
    s, t = steps.c, tool_calls.c
    lease = select(func.min(s.lease_until)).where(s.status == "running",
                                                   s.lease_until > lease_after)
    hold = select(func.min(s.lease_until)).where(s.status == "scheduled",
                                                  s.lease_until > hold_after)
    call = select(func.min(t.expires_at)).where(t.status == "pending", t.expires_at > call_after)
    row = conn.execute(select(lease.scalar_subquery(), hold.scalar_subquery(),
                              call.scalar_subquery())).one()
    return Deadlines(*row)


def list_lapsed_steps_txn(
    conn: Connection, *, lease_after: datetime, hold_after: datetime, lease_now: datetime,
    hold_now: datetime, limit: int,
) -> list[tuple[StepRecord, str | None]]:
    """Running steps whose lease ran out in (lease_after, lease_now], and held steps whose
    hold ended in (hold_after, hold_now], oldest first, each with its tool's name."""
    c = steps.c
    lapsed = and_(c.status == "running", c.lease_until > lease_after, c.lease_until <= lease_now)
    held = and_(c.status == "scheduled", c.lease_until > hold_after, c.lease_until <= hold_now)
    query: Any = with_tool(
        select(steps).where(lapsed | held).order_by(c.lease_until, c.step_key).limit(limit)
    )
    return steps_with_tools(conn.execute(query))


def list_calls_due_txn(
    conn: Connection, *, after: datetime, now: datetime, limit: int
) -> list[ToolCallRecord]:
    """Pending calls whose deadline came in (after, now], soonest first."""
    c = tool_calls.c
    query = (
        select(tool_calls)
        .where(c.status == "pending", c.expires_at > after, c.expires_at <= now)
        .order_by(c.expires_at, c.conversation_id, c.id)
        .limit(limit)
    )
    return [call_from_row(row) for row in conn.execute(query)]
