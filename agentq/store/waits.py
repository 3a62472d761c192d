"""Who may be waiting for a running step's slot: the `waited_on` flag, so a step's commit
reads what its freed slot wakes only when a step of its tenant may wait for that slot
(inv. 9, docs/design.md "A freed slot is read only when waited on").

Two writers set the flag, and between them no wake-up is lost:

- a claim that takes a slot sets it if a step of its tenant (of the queue's kinds) waits at
  that moment, counted under the tenant's claim lock (`tenant_waits`);
- a step left waiting sets it on every step of its tenant (of those kinds) running then
  (`mark_waited_on_txn`), before it looks for a slot once more.

The commit's guard locks the step's row FOR NO KEY UPDATE, as the finish's own UPDATE
would, and reads the flag there: a lock that waited for a mark reads the row's newest
version, so a mark made while the commit ran is seen by it or finds the step finished.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Integer,
    bindparam,
    func,
    literal,
    literal_column,
    select,
    true,
    update,
)

from agentq.store.cap_rule import WAITING
from agentq.store.dialects import Dialect
from agentq.store.schema import steps


def tenant_waits(dialect: Dialect, tenant: Any, *, by_kind: bool) -> ColumnElement[bool]:
    """Whether a step of `tenant` (of the kinds in :kinds, with `by_kind`) waits for a slot,
    as a capped claim sees it: under the tenant's claim lock on PostgreSQL.

    It is the cap rule's count for a step that would arrive at the end of time (every
    waiting step is ahead of it, none runs under a lease that lasts until then), up to
    one; on PostgreSQL `agentq_slots_taken`, which counts after taking the lock, in a
    snapshot taken then: a step left waiting by a claim that held the lock before is seen.
    """
    c = steps.c
    where = [c.tenant == tenant, c.status == WAITING]
    if by_kind:
        where.append(c.kind.in_(bindparam("kinds", expanding=True)))
    inline = select(func.count()).select_from(
        select(literal(1).label("one")).where(*where).limit(1).subquery("waits")
    ).scalar_subquery()
    # the arguments of the rule's function, where the dialect runs it as one (PostgreSQL)
    end_of_time: ColumnElement[Any] = literal_column("'infinity'::timestamptz")
    counted = dialect.slots_taken(inline, steps, tenant=tenant, step_key=literal(""),
                                  now=end_of_time, cap=literal(1),
                                  lock_key=bindparam("lock_key", type_=Integer),
                                  by_kind=by_kind)
    return counted > 0


def mark_waited_on_txn(conn: Connection, tenant: str, kinds: Sequence[str] | None) -> int:
    """Set `waited_on` on every running step of `tenant` (of `kinds`, else of any kind):
    a step of the tenant was just left waiting. How many rows were marked now."""
    c = steps.c
    where = [c.tenant == tenant, c.status == "running", c.waited_on.is_not(true())]
    if kinds is not None:
        where.append(c.kind.in_(list(kinds)))
    return conn.execute(update(steps).where(*where).values(waited_on=True)).rowcount


def waited_on(locked: Any) -> ColumnElement[bool]:
    """From the commit's guard on the step's row (`locked`, with `waited_on`, locked FOR NO
    KEY UPDATE): whether the step was waited on; true when the guard found no row, so a
    caller that reads it wakes by default."""
    return func.coalesce(select(locked.c.waited_on).scalar_subquery(), literal_column("true"))
