"""The steps to take up again: stale ones the sweeper re-drives, and those that wait for a
slot of their tenant (woken in arrival order). Each comes with its tool's name, which a
tool step's task is routed by (agentq.worker.queues).
"""
from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Connection, Engine, and_, bindparam, func, or_, select

from agentq.core.events import ToolCallRecord
from agentq.store.calls import list_overdue_calls_txn
from agentq.store.conversations import list_stalled_conversations_txn
from agentq.store.dialects import Dialect
from agentq.store.engine import begin_read
from agentq.store.ledger import READY, WAITING, StepRecord, step_from_row
from agentq.store.schema import steps, tool_calls


def list_stale_steps_txn(
    conn: Connection, *, now: datetime, scheduled_before: datetime, limit: int
) -> list[tuple[StepRecord, str | None]]:
    """Steps whose lease ran out, and ready ones created before `scheduled_before`, oldest
    first, each with its tool's name (None for other kinds). Waiting steps are not stale:
    they wait for their tenant's slots (`list_waiting_steps_txn`)."""
    c = steps.c
    expired = and_(c.status == "running", c.lease_until < now)
    ready = and_(c.status.in_(READY), c.created_at < scheduled_before,
                 or_(c.lease_until.is_(None), c.lease_until < now))  # not held (hold_step)
    query = with_tool(
        select(steps).where(or_(expired, ready)).order_by(c.created_at, c.step_key).limit(limit)
    )
    return steps_with_tools(conn.execute(query))


def next_waiting_step_txn(
    conn: Connection, tenant: str, kinds: tuple[str, ...] | None = None, *, others: bool = False
) -> tuple[StepRecord, str | None] | None:
    """The tenant's waiting step (of `kinds`, else of any kind) that arrived first, with its
    tool's name: the next to run; with `others`, that of any other tenant instead."""
    c = steps.c
    where = [c.tenant != tenant if others else c.tenant == tenant, c.status == WAITING]
    if kinds is not None:
        where.append(c.kind.in_(kinds))
    query = with_tool(select(steps).where(*where).order_by(c.created_at, c.step_key).limit(1))
    found = steps_with_tools(conn.execute(query))
    return found[0] if found else None


def next_waiting_steps_txn(
    conn: Connection, tenant: str, kinds: tuple[str, ...] | None
) -> list[tuple[StepRecord, str | None]]:
    """`next_waiting_step_txn` of the tenant and, with `kinds`, that of any other tenant
    too, in one statement: what a freed slot wakes. The tenant's comes first."""
    params: dict[str, Any] = {"tenant": tenant}
    if kinds is not None:
        params["kinds"] = list(kinds)
    return steps_with_tools(conn.execute(_next_waiting(kinds is not None), params))


@cache
def _next_waiting(of_kinds: bool) -> Any:
    """The statement of `next_waiting_steps_txn`, built once: it runs after every step under
    a fair share, and building it (two subqueries and the join to the calls) cost a worker
    about 0.8 ms of CPU, several times its round trip."""
    c = steps.c
    tenant: Any = bindparam("tenant")

    def first(*where: Any) -> Any:
        kind = (c.kind.in_(bindparam("kinds", expanding=True)),) if of_kinds else ()
        return (select(c.step_key).where(c.status == WAITING, *where, *kind)
                .order_by(c.created_at, c.step_key).limit(1))

    found: Any = c.step_key.in_(first(c.tenant == tenant))
    if of_kinds:
        found = or_(found, c.step_key.in_(first(c.tenant != tenant)))
    return with_tool(select(steps).where(found).order_by((c.tenant == tenant).desc()))


def list_waiting_steps_txn(
    conn: Connection, *, now: datetime, per_tenant: int
) -> tuple[dict[str, int], list[tuple[StepRecord, str | None]]]:
    """For each tenant with waiting steps: how many of its steps run under a live lease, and
    its first `per_tenant` waiting steps in arrival order (with their tools' names)."""
    c = steps.c
    waiting_tenants = select(c.tenant).where(c.status == WAITING).distinct()
    running = conn.execute(
        select(c.tenant, func.count()).where(
            c.status == "running", c.lease_until >= now, c.tenant.in_(waiting_tenants)
        ).group_by(c.tenant)
    ).all()
    place = func.row_number().over(partition_by=c.tenant, order_by=(c.created_at, c.step_key))
    ranked = select(steps, place.label("place")).where(c.status == WAITING).subquery("ranked")
    query = with_tool(
        select(*(ranked.c[column.key] for column in steps.c))
        .where(ranked.c.place <= per_tenant)
        .order_by(ranked.c.tenant, ranked.c.place),
        ranked,
    )
    return {tenant: int(n) for tenant, n in running}, steps_with_tools(conn.execute(query))


def with_tool(query: Any, rows: Any = steps) -> Any:
    """`query` over step rows, with the name of each tool step's call as `tool`."""
    call_id = rows.c.ref["tool_call_id"].as_string()
    calls = tool_calls.alias("call")
    joined = rows.outerjoin(
        calls, and_(calls.c.conversation_id == rows.c.conversation_id, calls.c.id == call_id)
    )
    return query.select_from(joined).add_columns(calls.c.name.label("tool"))


def steps_with_tools(result: Any) -> list[tuple[StepRecord, str | None]]:
    return [(step_from_row(row), row.tool) for row in result]


class Backlog:
    """What the sweeper and a freed slot look for: stale and waiting steps, overdue calls,
    stalled conversations."""

    def __init__(self, engine: Engine, dialect: Dialect) -> None:
        self._engine = engine
        self._dialect = dialect

    def list_stale_steps(
        self, *, now: datetime, scheduled_before: datetime, limit: int = 100
    ) -> list[tuple[StepRecord, str | None]]:
        """Running steps past their lease, and ready ones created before `scheduled_before`,
        each with its tool's name (None for steps of other kinds)."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return list_stale_steps_txn(conn, now=now, scheduled_before=scheduled_before,
                                        limit=limit)

    def next_waiting_step(
        self, tenant: str, kinds: tuple[str, ...] | None = None, *, others: bool = False
    ) -> tuple[StepRecord, str | None] | None:
        """The tenant's step (of `kinds`, else of any) that has waited longest for a slot,
        with its tool's name; with `others`, that of any other tenant."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return next_waiting_step_txn(conn, tenant, kinds, others=others)

    def next_waiting_steps(
        self, tenant: str, kinds: tuple[str, ...] | None
    ) -> list[tuple[StepRecord, str | None]]:
        """What a freed slot of `tenant` wakes, in one read: its step that has waited
        longest (of `kinds`, else of any) and, with `kinds`, that of any other tenant."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return next_waiting_steps_txn(conn, tenant, kinds)

    def list_waiting_steps(
        self, *, now: datetime, per_tenant: int = 100
    ) -> tuple[dict[str, int], list[tuple[StepRecord, str | None]]]:
        """Per tenant with waiting steps: its steps running now, and its first waiting ones."""
        with begin_read(self._engine) as conn:
            return list_waiting_steps_txn(conn, now=now, per_tenant=per_tenant)

    def list_overdue_calls(self, *, now: datetime, limit: int = 100) -> list[ToolCallRecord]:
        """Pending calls whose `expires_at` has come, soonest first, across conversations."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return list_overdue_calls_txn(conn, now=now, limit=limit)

    def list_stalled_conversations(
        self, *, updated_before: datetime, now: datetime | None = None, limit: int = 500
    ) -> list[str]:
        """Conversations with work to do that have not moved since `updated_before`, and
        run no step under a lease live at `now` (by default, `updated_before`)."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return list_stalled_conversations_txn(
                conn, updated_before=updated_before, now=now or updated_before, limit=limit
            )
