"""Running totals for budgets: the tokens, and what they cost, of a tenant, an agent and a
conversation in the current hour, day, month (or the conversation's whole life).

`add_totals_txn` adds a call's tokens in the transaction that commits it (on PostgreSQL, a
model step's in the very statement that finishes it, with its usage rollup: `adding_rows`),
so every worker's commits count and a call counts once. A row holds one period: a
commit in a later period starts it afresh, one from an earlier period (a worker whose clock
lags) leaves it be. A budget check (`spent_txn`) reads at most seven rows by primary key,
whatever the period's length: the rollups are for reports, these are for checks.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from sqlalchemy import Connection, and_, case, literal, or_, select
from sqlalchemy.dialects import postgresql

from agentq.core.token_budgets import Meter
from agentq.store import dialects
from agentq.store.dialects import Dialect
from agentq.store.engine import parameter_rows
from agentq.store.schema import conversations
from agentq.store.spend_tables import budget_totals


@dataclass(frozen=True)
class Spent:
    """What a conversation's budget check reads: its agent, and the totals of its tenant,
    agent and itself as they stand (a total of an earlier period is absent)."""

    agent: str | None
    totals: dict[Meter, int]
    costs: dict[Meter, int] = field(default_factory=dict)  # nanos, per meter

    def of(self, meter: Meter) -> int:
        return self.totals.get(meter, 0)

    def cost_of(self, meter: Meter) -> int:
        return self.costs.get(meter, 0)


def add_totals_txn(conn: Connection, tenant: str, meters: Sequence[Meter], tokens: int,
                   cost_nanos: int = 0) -> None:
    """Add `tokens` and their cost to each meter's total (one statement), in the caller's
    transaction."""
    add_total_rows_txn(conn, total_rows(tenant, meters, tokens, cost_nanos))


def add_total_rows_txn(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Add the rows `total_rows` made (one statement; none for no rows)."""
    if rows:
        conn.execute(_adding(dialects.of(conn)), [dict(row) for row in rows])


def total_rows(tenant: str, meters: Sequence[Meter], tokens: int, cost_nanos: int = 0
               ) -> list[dict[str, Any]]:
    """The rows `add_total_rows_txn` (or `adding_rows`) adds `tokens` and `cost_nanos` to:
    none for nothing spent."""
    if tokens <= 0 and cost_nanos <= 0:
        return []
    return [{"tenant": tenant, "scope": m.scope, "name": m.name, "period": m.period,
             "period_start": m.start, "tokens": tokens, "cost_nanos": cost_nanos}
            for m in meters]


TOTAL_COLUMNS = ("tenant", "scope", "name", "period", "period_start", "tokens", "cost_nanos")


@cache
def _adding(dialect: Dialect) -> Any:
    """The upsert of one total, built once per dialect (run for each meter of a call)."""
    return _added(dialect.insert(budget_totals))


@cache
def adding_rows(count: int, prefix: str, *, where: Any = None) -> Any:
    """The upsert of `count` totals in one PostgreSQL statement, their parameters named as
    `engine.parameter_rows` names them: a part of the statement that finishes a model step
    (with `where`, a no-op unless it holds)."""
    source = parameter_rows(budget_totals, TOTAL_COLUMNS, prefix, count, where=where)
    return _added(postgresql.insert(budget_totals).from_select(list(TOTAL_COLUMNS), source))


def _added(statement: Any) -> Any:
    """`statement` adding its tokens to a total of the same period, starting a later one
    afresh and leaving one of an earlier period be (a worker whose clock lags)."""
    c, new = budget_totals.c, statement.excluded
    return statement.on_conflict_do_update(
        index_elements=[c.tenant, c.scope, c.name, c.period],
        set_={
            **{name: case((c.period_start == new.period_start, c[name] + new[name]),
                          (c.period_start < new.period_start, new[name]), else_=c[name])
               for name in ("tokens", "cost_nanos")},
            "period_start": case((c.period_start < new.period_start, new.period_start),
                                 else_=c.period_start),
        },
    )


def spent_txn(conn: Connection, conversation_id: str) -> Spent | None:
    """The totals a model call of the conversation is checked against (None: no such
    conversation), in one read: the conversation's row joined to at most seven totals."""
    c, t = conversations.c, budget_totals.c
    whose = or_(and_(t.scope == literal("tenant"), t.name == literal("")),
                and_(t.scope == literal("agent"), t.name == c.agent_name),
                and_(t.scope == literal("conversation"), t.name == c.id))
    query = (select(c.agent_name, t.scope, t.name, t.period, t.period_start, t.tokens,
                    t.cost_nanos)
             .select_from(conversations.outerjoin(budget_totals,
                                                  and_(t.tenant == c.tenant, whose)))
             .where(c.id == conversation_id))
    rows = conn.execute(query).all()
    if not rows:
        return None
    found = [(Meter(row.scope, row.name, row.period, row.period_start), row)
             for row in rows if row.scope is not None]
    return Spent(agent=rows[0].agent_name,
                 totals={meter: int(row.tokens) for meter, row in found},
                 costs={meter: int(row.cost_nanos) for meter, row in found})
