"""What GET /metrics shows: a few aggregate queries over the ledger, calls and inbox.

Read at scrape time, in one snapshot, so every API process answers the same and no
worker has to push anything. The steps ledger only holds what `agentq.gc` has not
dropped yet (finished rows for `keep_s`, a week by default), so the step figures are
levels over that window, not counters since the start.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, Connection, Engine, case, func, select

from agentq.store import dialects
from agentq.store.dialects import Dialect
from agentq.store.engine import begin_read
from agentq.store.schema import inbox, steps, tool_calls

# Seconds from a step's (last) claim to its finish: a model call takes seconds to minutes.
LATENCY_BOUNDS_S = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


@dataclass(frozen=True)
class Latency:
    """A histogram of one step kind: how many took at most each bound, their count and sum."""

    bounds_s: tuple[float, ...]
    at_most: tuple[int, ...]
    count: int
    sum_s: float


@dataclass(frozen=True)
class StoreMetrics:
    """Aggregates of every conversation at one instant; no ids, no tenants, no content."""

    steps: dict[tuple[str, str], int]  # (kind, status) -> rows in the ledger
    retries: dict[str, int]  # kind -> model-call retries recorded on those rows
    latency: dict[str, Latency]  # kind -> finished rows still in the ledger
    pending: dict[str, int]  # executor -> pending calls
    oldest_pending_at: datetime | None
    inbox: int  # user messages not yet taken into a turn


def _duration_s(conn: Connection) -> ColumnElement[float]:
    """finished_at - started_at in seconds."""
    return dialects.of(conn).duration_s(steps.c.finished_at, steps.c.started_at)


def steps_by_kind_and_status_txn(conn: Connection) -> tuple[dict, dict]:
    c = steps.c
    rows = conn.execute(
        select(c.kind, c.status, func.count(), func.coalesce(func.sum(c.retries), 0))
        .group_by(c.kind, c.status)
    ).all()
    retries: dict[str, int] = {}
    for kind, _, _, tries in rows:
        retries[kind] = retries.get(kind, 0) + int(tries)
    return {(kind, status): int(n) for kind, status, n, _ in rows}, retries


def latency_by_kind_txn(conn: Connection, bounds_s: Sequence[float]) -> dict[str, Latency]:
    c = steps.c
    # MATERIALIZED: each duration is computed once, not once per bucket it is compared with.
    durations = (
        select(c.kind, _duration_s(conn).label("took_s"))
        .where(c.started_at.is_not(None), c.finished_at.is_not(None))
        .cte("durations").prefix_with("MATERIALIZED")
    )
    took = durations.c.took_s
    at_most = [func.sum(case((took <= bound, 1), else_=0)) for bound in bounds_s]
    rows = conn.execute(
        select(durations.c.kind, func.count(), func.sum(took), *at_most).group_by(durations.c.kind)
    ).all()
    return {
        kind: Latency(tuple(bounds_s), tuple(int(n or 0) for n in counts), int(count),
                      float(total or 0.0))
        for kind, count, total, *counts in rows
    }


def pending_calls_txn(conn: Connection) -> tuple[dict[str, int], datetime | None]:
    """Pending calls by who they wait on: `human`, `client`, `approval` (a server call
    that waits for a person's decision) or `question` (one whose tool server asked them)."""
    c = tool_calls.c
    waits_on = case((c.needs_approval.is_(True), "approval"),
                    (c.elicitation.is_not(None), "question"), else_=c.executor)
    rows = conn.execute(
        select(waits_on, func.count(), func.min(c.created_at))
        .where(c.status == "pending").group_by(waits_on)
    ).all()
    oldest = min((row[2] for row in rows), default=None)
    return {executor: int(n) for executor, n, _ in rows}, oldest


def waiting_inbox_txn(conn: Connection) -> int:
    return conn.execute(select(func.count()).where(inbox.c.taken_at.is_(None))).scalar_one()


class Metrics:
    """The metrics verb of `Store`."""

    def __init__(self, engine: Engine, dialect: Dialect) -> None:
        self._engine = engine
        self._dialect = dialect

    def load(self, *, latency_bounds_s: Sequence[float] = LATENCY_BOUNDS_S) -> StoreMetrics:
        """Every aggregate GET /metrics exposes, from one read snapshot."""
        with begin_read(self._engine) as conn:
            by_status, retries = steps_by_kind_and_status_txn(conn)
            pending, oldest = pending_calls_txn(conn)
            return StoreMetrics(
                steps=by_status,
                retries=retries,
                latency=latency_by_kind_txn(conn, latency_bounds_s),
                pending=pending,
                oldest_pending_at=oldest,
                inbox=waiting_inbox_txn(conn),
            )
