"""Usage rollups: tokens, calls and their cost per tenant, hour, agent, profile, model and
conversation.

A model call's tokens are added (`add_usage_txn`, one upsert) in the transaction that
appends its assistant_msg, which commits once per step (on PostgreSQL the upsert is a part
of the statement that finishes the step, `agentq.store.step_commit`): a step that runs again after a
crash either committed before (and its retry is Stale, writing nothing) or did not (and
nothing was counted). Reads (`Usage.report`) sum rollup rows only, never events,
over a bounded range; budget checks read the running totals beside them
(agentq.store.budget_totals).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Connection, Engine, func, select, type_coerce

from agentq.core.agent_tools import Parent
from agentq.core.agents import AgentRef
from agentq.core.settings import Settings
from agentq.core.timefmt import to_utc
from agentq.core.usage import COUNTS, Tokens, hour_of
from agentq.store import dialects
from agentq.store.budget_totals import Spent, spent_txn
from agentq.store.column_types import Timestamp
from agentq.store.dialects import Dialect
from agentq.store.engine import begin_read, param
from agentq.store.spend_tables import usage_rollups

# The dimensions a report may group by, and the column each reads.
DIMENSIONS = {
    "tenant": "tenant", "agent": "agent", "profile": "profile", "model": "model",
    "conversation": "conversation_id",
    # the top of a tree of sub-agents: a parent's usage with its children's (NULL: a root)
    "root_conversation": "root_conversation_id",
}


@dataclass(frozen=True)
class UsageKey:
    """Where one call's tokens count: its tenant, agent (None: none), profile and model
    (None: the profile's default) and conversation."""

    tenant: str
    agent: str | None
    profile: str
    model: str | None
    conversation_id: str
    root_conversation_id: str | None = None  # a child's root: its tokens count in the tree's


def usage_key(conversation_id: str, *, tenant: str, settings: Settings, agent: AgentRef | None,
              parent: Parent | None, model: str | None) -> UsageKey:
    """Where a call of the conversation, to `model` (None: its profile's default), counts."""
    return UsageKey(tenant=tenant, agent=agent.name if agent else None,
                    profile=settings.profile, model=model, conversation_id=conversation_id,
                    root_conversation_id=None if parent is None else parent.root_id)


@dataclass(frozen=True)
class UsageRow:
    """One group of a report: its period's start, the dimensions asked for, the counts."""

    start: datetime
    keys: dict[str, str | None]
    tokens: Tokens
    cost_nanos: int = 0  # what the calls cost (agentq.core.prices)


def add_usage_txn(conn: Connection, key: UsageKey, tokens: Tokens, *, at: datetime,
                  cost_nanos: int = 0) -> None:
    """Add `tokens` and their cost to the rollup row of `key` for the hour of `at` (one upsert)."""
    conn.execute(upsert_usage(dialects.of(conn)),
                 usage_values(key, tokens, at=at, cost_nanos=cost_nanos))


def usage_values(key: UsageKey, tokens: Tokens, *, at: datetime, prefix: str = "",
                 cost_nanos: int = 0) -> dict[str, Any]:
    """The parameters of `upsert_usage(…, prefix)` that add `tokens` and what they cost to
    `key`'s hour of `at`."""
    values = {"tenant": key.tenant, "hour": hour_of(at), "agent": key.agent or "",
              "profile": key.profile, "model": key.model or "",
              "conversation_id": key.conversation_id,
              "root_conversation_id": key.root_conversation_id, **tokens.to_json(),
              "cost_nanos": cost_nanos}
    return {prefix + name: value for name, value in values.items()}


ADDED = (*COUNTS, "cost_nanos")  # the columns an upsert adds to


@cache
def upsert_usage(dialect: Dialect, prefix: str = "", *, where: Any = None) -> Any:
    """The upsert that adds counts to one rollup row, its parameters named `<prefix><column>`:
    built once per dialect, and a part of a larger statement with a `prefix` (and, with
    `where`, a no-op unless it holds)."""
    c = usage_rollups.c
    names = ("tenant", "hour", "agent", "profile", "model", "conversation_id",
             "root_conversation_id", *ADDED)
    values = {name: param(c[name], prefix + name) for name in names}
    statement = (dialect.insert(usage_rollups).values(values) if where is None else
                 dialect.insert(usage_rollups).from_select(
                     list(names), select(*(v.label(n) for n, v in values.items())).where(where)))
    return statement.on_conflict_do_update(
        index_elements=[c.tenant, c.hour, c.agent, c.profile, c.model, c.conversation_id],
        set_={name: c[name] + statement.excluded[name] for name in ADDED},
    )


def report_txn(
    conn: Connection, *, tenant: str | None, start: datetime, end: datetime, group_by: str,
    by: Sequence[str], limit: int,
) -> list[UsageRow]:
    """The counts of the hours in [hour_of(start), end), summed per period (`group_by`: hour
    or day) and per dimension in `by`; at most `limit` rows, in period then key order."""
    c = usage_rollups.c
    bucket = _bucket(dialects.of(conn), group_by).label("start")
    dims = [_dimension(name).label(name) for name in by]
    query = (
        select(bucket, *dims, *(func.sum(c[n]).label(n) for n in ADDED))
        .where(c.hour >= hour_of(start), c.hour < to_utc(end))
        .group_by(bucket, *dims)
        .order_by(bucket, *dims)
        .limit(limit)
    )
    if tenant is not None:
        query = query.where(c.tenant == tenant)
    rows = []
    for row in conn.execute(query):
        values = row._mapping
        start_at = values["start"]
        rows.append(UsageRow(
            start=start_at,
            keys={name: (values[name] or None) for name in by},
            tokens=Tokens(*(int(values[n]) for n in COUNTS)),
            cost_nanos=int(values["cost_nanos"]),
        ))
    return rows


def _dimension(name: str) -> Any:
    c = usage_rollups.c
    if name == "root_conversation":  # a root's own rows name no root: they are its own
        return func.coalesce(c.root_conversation_id, c.conversation_id)
    return c[DIMENSIONS[name]]


def _bucket(dialect: Dialect, group_by: str) -> Any:
    """The start of a rollup row's period, as a Timestamp: its hour, or its UTC day."""
    hour = usage_rollups.c.hour
    if group_by == "hour":
        return hour
    return type_coerce(dialect.utc_day(hour), Timestamp)


class Usage:
    """The usage reads of the store (the writes are in the model step's commit)."""

    def __init__(self, engine: Engine, dialect: Dialect) -> None:
        self._engine = engine
        self._dialect = dialect

    def report(
        self, *, tenant: str | None, start: datetime, end: datetime, group_by: str,
        by: Sequence[str], limit: int,
    ) -> list[UsageRow]:
        """See `report_txn`; `tenant` None is every tenant (the operator's read)."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return report_txn(conn, tenant=tenant, start=start, end=end, group_by=group_by,
                              by=by, limit=limit)

    def load_spent(self, conversation_id: str) -> Spent | None:
        """See `spent_txn`: what a budget check reads, by primary key."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return spent_txn(conn, conversation_id)

    def token_totals(self) -> dict[tuple[str, str], Tokens]:
        """Every token counted, per (profile, model): the /metrics counters."""
        c = usage_rollups.c
        query = (select(c.profile, c.model, *(func.sum(c[n]) for n in COUNTS))
                 .group_by(c.profile, c.model))
        with begin_read(self._engine, one_snapshot=False) as conn:
            return {(row[0], row[1]): Tokens(*(int(v) for v in row[2:]))
                    for row in conn.execute(query)}


