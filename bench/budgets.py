"""What a token-budget check costs before each model call, and what counting adds to a commit.

A budget check reads the running totals of the conversation's tenant, agent and itself
(`agentq.store.budget_totals`: a few rows by primary key). Before them it summed the
tenant's hourly usage rollups from the start of the longest budgeted period: a month of
rows per conversation. This seeds one tenant with `--conversations` conversations that
each spent in every hour of a 30-day month, then times both reads, and the upsert of the
totals that each model call's commit now adds beside its rollup.

    python bench/budgets.py [--conversations 100] [--calls 500]

PostgreSQL (127.0.0.1:5432) and SQLite; every database it makes is dropped at the end.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import case, func, insert, select  # noqa: E402

from agentq.core.settings import Settings  # noqa: E402
from agentq.core.token_budgets import meters_of, period_start  # noqa: E402
from agentq.core.usage import Tokens  # noqa: E402
from agentq.store import Store  # noqa: E402
from agentq.store.budget_totals import add_totals_txn  # noqa: E402
from agentq.store.spend_tables import usage_rollups  # noqa: E402
from agentq.store.usage import UsageKey, add_usage_txn  # noqa: E402
from bench.places import postgres_database  # noqa: E402
from bench.timing import timed  # noqa: E402

NOW = datetime(2026, 11, 30, 23, 30, tzinfo=UTC)  # the last hour of a 30-day month
PERIODS = ("hour", "day", "month")


def seed(store: Store, conversations: int) -> str:
    """A tenant whose conversations each spent in every hour of the month; one of their ids."""
    cids = [store.conversations.create(tenant="acme", settings=Settings(), now=NOW).id
            for _ in range(conversations)]
    start = period_start("month", NOW)
    hours = int((NOW - start).total_seconds() // 3600) + 1
    with store.engine.begin() as conn:
        for cid in cids:
            conn.execute(insert(usage_rollups), [
                {"tenant": "acme", "hour": start + timedelta(hours=h), "agent": "",
                 "profile": "scripted", "model": "", "conversation_id": cid,
                 "input_tokens": 100, "output_tokens": 10, "cached_tokens": 0,
                 "reasoning_tokens": 0, "calls": 1} for h in range(hours)])
        add_totals_txn(conn, "acme", meters_of(None, cids[0], NOW), 110)
    return cids[0]


def summed_rollups(store: Store) -> dict[str, int]:
    """The read budgets made before the totals: the month's rollup rows, summed per period."""
    c = usage_rollups.c
    starts = {p: period_start(p, NOW) for p in PERIODS}
    tokens = c.input_tokens + c.output_tokens
    sums = [func.coalesce(func.sum(case((c.hour >= at, tokens), else_=0)), 0).label(p)
            for p, at in starts.items()]
    with store.engine.connect() as conn:
        row = conn.execute(select(*sums).where(c.tenant == "acme",
                                               c.hour >= starts["month"])).one()
    return dict(row._mapping)


def commits(store: Store, cid: str, calls: int) -> list[tuple[str, float, float]]:
    """A commit's usage writes alone (its rollup upsert), then with the totals beside it, each
    in its own transaction: the difference is what counting for budgets adds to a commit."""
    key = UsageKey("acme", "support", "scripted", None, cid)
    one = Tokens(input_tokens=100, output_tokens=10, calls=1)

    def rollup_only() -> None:
        with store.engine.begin() as conn:
            add_usage_txn(conn, key, one, at=NOW)

    def with_totals() -> None:
        with store.engine.begin() as conn:
            add_usage_txn(conn, key, one, at=NOW)
            add_totals_txn(conn, "acme", meters_of("support", cid, NOW), one.total)

    return [("commit: rollup", *timed(rollup_only, calls)),
            ("commit: rollup + totals", *timed(with_totals, calls))]


def measure(name: str, url: str, conversations: int, calls: int
            ) -> list[tuple[str, float, float]]:
    store = Store.open(url)
    store.migrate()
    cid = seed(store, conversations)
    store.usage.load_spent(cid)  # warm the pool
    rows = [(f"{name}: sum of rollups", *timed(lambda: summed_rollups(store),
                                                max(calls // 10, 20))),
            (f"{name}: running totals", *timed(lambda: store.usage.load_spent(cid), calls))]
    rows += [(f"{name}: {what}", median, p95) for what, median, p95 in commits(store, cid, calls)]
    store.dispose()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    rows = []
    with postgres_database() as pg_url, tempfile.TemporaryDirectory() as folder:
        for name, url in (("PostgreSQL", pg_url), ("SQLite", f"sqlite:///{folder}/budgets.db")):
            rows += measure(name, url, args.conversations, args.calls)
    month = args.conversations * (NOW - period_start("month", NOW)).days * 24
    print(f"one tenant, {args.conversations} conversations, ~{month} rollup rows this month")
    print(f"{'per check or commit':<34} {'median µs':>10} {'p95 µs':>10}")
    for name, median, p95 in rows:
        print(f"{name:<34} {median:>10.0f} {p95:>10.0f}")


if __name__ == "__main__":
    main()
