"""Turn rollups: one row per turn with its model calls' tokens and cost, when it started
and how long until its last call committed: what the operator's overview ranks turns by.

Written like the usage rollups (agentq.store.usage): one upsert in the transaction that
commits each model call (on PostgreSQL, a part of the statement that finishes the step),
so a step that runs again after a kill counts nothing twice. A turn's duration is from its
first event to the commit of its latest model call. Reads rank the turns that started in a
bounded range, by an index on `started_at`, never the events.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, Literal

from sqlalchemy import Connection, Engine, case, select

from agentq.core.timefmt import to_utc
from agentq.core.usage import Tokens
from agentq.store import dialects
from agentq.store.dialects import Dialect
from agentq.store.engine import begin_read, param
from agentq.store.spend_tables import turn_usage
from agentq.store.usage import UsageKey

ADDED = ("input_tokens", "output_tokens", "calls", "cost_nanos")  # summed on each call
Ranking = Literal["duration", "cost"]


@dataclass(frozen=True)
class TurnRef:
    """The turn a model call belongs to, and when it started (its first event)."""

    turn_id: str
    started_at: datetime


@dataclass(frozen=True)
class TurnUsage:
    """One turn's row: whose, when, how long, and what its model calls spent."""

    tenant: str
    agent: str | None
    conversation_id: str
    root_conversation_id: str | None
    turn_id: str
    started_at: datetime
    duration_ms: int
    input_tokens: int
    output_tokens: int
    calls: int
    cost_nanos: int


def turn_values(key: UsageKey, turn: TurnRef, tokens: Tokens, cost_nanos: int, *,
                at: datetime, prefix: str = "") -> dict[str, Any]:
    """The parameters of `upsert_turn(…, prefix)` adding one commit's call(s) at `at`."""
    started = to_utc(turn.started_at)
    values = {"conversation_id": key.conversation_id, "turn_id": turn.turn_id,
              "tenant": key.tenant, "agent": key.agent or "",
              "root_conversation_id": key.root_conversation_id, "started_at": started,
              "duration_ms": max(int((to_utc(at) - started).total_seconds() * 1000), 0),
              "input_tokens": tokens.input_tokens, "output_tokens": tokens.output_tokens,
              "calls": tokens.calls, "cost_nanos": cost_nanos}
    return {prefix + name: value for name, value in values.items()}


@cache
def upsert_turn(dialect: Dialect, prefix: str = "", *, where: Any = None) -> Any:
    """The upsert adding a commit's call(s) to its turn's row, parameters `<prefix><column>`
    (with `where`, a no-op unless it holds): sums add, the start is the earliest seen and
    the duration the longest."""
    c = turn_usage.c
    names = ("conversation_id", "turn_id", "tenant", "agent", "root_conversation_id",
             "started_at", "duration_ms", *ADDED)
    values = {name: param(c[name], prefix + name) for name in names}
    insert = dialect.insert(turn_usage)
    statement = (insert.values(values) if where is None else insert.from_select(
        list(names), select(*(v.label(n) for n, v in values.items())).where(where)))
    new = statement.excluded
    return statement.on_conflict_do_update(
        index_elements=[c.conversation_id, c.turn_id],
        set_={**{name: c[name] + new[name] for name in ADDED},
              "started_at": case((new.started_at < c.started_at, new.started_at),
                                 else_=c.started_at),
              "duration_ms": case((new.duration_ms > c.duration_ms, new.duration_ms),
                                  else_=c.duration_ms)},
    )


def add_turn_txn(conn: Connection, key: UsageKey, turn: TurnRef, tokens: Tokens,
                 cost_nanos: int, *, at: datetime) -> None:
    conn.execute(upsert_turn(dialects.of(conn)),
                 turn_values(key, turn, tokens, cost_nanos, at=at))


def ranked_txn(conn: Connection, *, start: datetime, end: datetime, by: Ranking, limit: int,
               tenant: str | None = None) -> list[TurnUsage]:
    """The turns that started in [start, end), longest or costliest first; ties by id."""
    c = turn_usage.c
    measure = c.duration_ms if by == "duration" else c.cost_nanos
    query = (select(turn_usage)
             .where(c.started_at >= to_utc(start), c.started_at < to_utc(end))
             .order_by(measure.desc(), c.conversation_id, c.turn_id).limit(limit))
    if tenant is not None:
        query = query.where(c.tenant == tenant)
    return [TurnUsage(**{**row._mapping, "agent": row.agent or None})
            for row in conn.execute(query)]


class Turns:
    """The turn rollups' reads (the writes are in the model step's commit)."""

    def __init__(self, engine: Engine, dialect: Dialect) -> None:
        self._engine = engine
        self._dialect = dialect

    def ranked(self, *, start: datetime, end: datetime, by: Ranking, limit: int,
               tenant: str | None = None) -> list[TurnUsage]:
        """See `ranked_txn`; `tenant` None is every tenant (the operator's read)."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return ranked_txn(conn, start=start, end=end, by=by, limit=limit, tenant=tenant)
