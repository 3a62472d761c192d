"""What one step asks of PostgreSQL: statements, round trips, rows written and WAL bytes.

The figures a capacity model is made of (docs/scaling.md), counted rather than timed, so a
busy machine does not blur them. A turn is model -> no-op tool -> model with the scripted
provider, run in-process on a fresh database under a tenant cap (as a worker runs a step
under the default fair share). Per step:

- statements, and round trips: each statement, plus the BEGIN and COMMIT of a transaction
  (psycopg sends each as a round trip of its own; a statement in autocommit has none);
- rows inserted, updated and deleted, from the database's own counters
  (`pg_stat_user_tables`: the database is the run's alone);
- WAL bytes: each write statement is first run under `EXPLAIN (ANALYZE, WAL)` and rolled
  back, which reports what it wrote (full-page images apart: they come after a checkpoint,
  whatever the statement), plus each commit record; and `pg_current_wal_lsn()` before and
  after, which on a shared server counts everyone's writes.

    python bench/step_costs.py [--turns 30] [--running-steps 1000]

PostgreSQL (127.0.0.1:5432); the database is dropped at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import event, text  # noqa: E402

from agentq.commands import Commands  # noqa: E402
from agentq.config import Config  # noqa: E402
from agentq.worker.wiring import build_runtime  # noqa: E402
from bench.places import postgres_database  # noqa: E402
from bench.steps import SCOPE, SETTINGS  # noqa: E402
from tests.support.drive import drain  # noqa: E402

WRITES = ("INSERT", "UPDATE", "DELETE", "WITH")
COMMIT_RECORD_BYTES = 46  # a commit record with no subtransactions or invalidations
STEPS_PER_TURN = 3


class Meter:
    """Counts what the store's engine sends, and the WAL of each write statement."""

    def __init__(self, engine: Any) -> None:
        self.on = False
        self.statements = self.round_trips = self.commits = 0
        self.wal_bytes = self.wal_records = self.wal_fpi = 0
        self.by_statement: dict[str, list[int]] = {}  # STEP_COSTS_BY_STATEMENT=1
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "begin", self._begin)

    def _begin(self, conn: Any) -> None:
        if self.on and conn.get_execution_options().get("isolation_level") != "AUTOCOMMIT":
            self.round_trips += 2  # BEGIN and COMMIT (or ROLLBACK)
            self.commits += 1

    def _before(self, conn: Any, cursor: Any, statement: str, params: Any, context: Any,
                executemany: bool) -> None:
        if not self.on:
            return
        self.statements += 1
        self.round_trips += 1
        head = statement.lstrip().split(None, 1)[0].upper()
        if head not in WRITES:
            return
        autocommit = bool(cursor.connection.autocommit)
        if autocommit:
            self.commits += 1
        cursor.execute("BEGIN" if autocommit else "SAVEPOINT wal_probe")
        try:
            cursor.execute("EXPLAIN (ANALYZE, WAL, FORMAT JSON) " + statement, params)
            plan = cursor.fetchone()[0]
            plan = plan[0]["Plan"] if isinstance(plan, list) else json.loads(plan)[0]["Plan"]
            self.wal_bytes += int(plan.get("WAL Bytes", 0))
            self.wal_records += int(plan.get("WAL Records", 0))
            self.wal_fpi += int(plan.get("WAL FPI", 0))
            if os.environ.get("STEP_COSTS_BY_STATEMENT"):
                key = " ".join(statement.split())[:70]
                got = self.by_statement.setdefault(key, [0, 0, 0])
                got[0] += 1
                got[1] += int(plan.get("WAL Records", 0))
                got[2] += int(plan.get("WAL Bytes", 0))
        finally:
            cursor.execute("ROLLBACK" if autocommit else "ROLLBACK TO SAVEPOINT wal_probe")


def table_rows(engine: Any) -> int:
    """Rows inserted, updated and deleted so far in this database's tables."""
    time.sleep(1.2)  # each backend reports its counters at most once a second
    with engine.connect() as conn:
        conn.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
        return int(conn.execute(text(
            "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables"
        )).scalar_one())


def wal_lsn(engine: Any) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(
            "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")).scalar_one())


def run(turns: int, running_steps: int | None, logs: Path) -> dict[str, float]:
    if running_steps is not None:  # the policy's cap, as bench/steps.py sets it
        policy = logs / "policy.toml"
        policy.write_text(f"[ceilings]\nrunning_steps = {running_steps}\n")
        os.environ["AGENTQ_POLICY"] = str(policy)
    with postgres_database() as db_url:
        config = Config(database_url=db_url, redis_url="embedded://bench-step-costs",
                        policy_path=os.environ.get("AGENTQ_POLICY"))
        runtime = build_runtime(config)
        runtime.store.migrate()
        commands = Commands(runtime.store, runtime.registry)
        cid = commands.create_conversation(SCOPE, SETTINGS).id
        for _ in range(3):  # warm: statements built, connections open
            drain(runtime, commands.post_message(cid, "warm up", SCOPE)[1])
        meter = Meter(runtime.store.engine)
        rows, lsn = 0, 0
        steps = STEPS_PER_TURN * turns
        for _ in range(turns):
            _, follow = commands.post_message(cid, "go", SCOPE)  # the command's, not a step's
            rows_before, lsn_before = table_rows(runtime.store.engine), wal_lsn(runtime.store.engine)
            meter.on = True
            drain(runtime, follow)
            meter.on = False
            lsn += wal_lsn(runtime.store.engine) - lsn_before
            rows += table_rows(runtime.store.engine) - rows_before
        runtime.store.dispose()
    for key, (count, records, wal) in sorted(meter.by_statement.items()):
        print(f"{count:4d} x {records / count:5.1f} records {wal / count:7.0f} B  {key}")
    return {
        "statements": meter.statements / steps,
        "round_trips": meter.round_trips / steps,
        "commits": meter.commits / steps,
        "rows": rows / steps,
        "wal_bytes": (meter.wal_bytes + COMMIT_RECORD_BYTES * meter.commits) / steps,
        "wal_records": meter.wal_records / steps,
        "wal_fpi": meter.wal_fpi / steps,
        "lsn_bytes": lsn / steps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--running-steps", type=int, default=1000,
                        help="the tenant cap each step runs under (0: none)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as logs:
        result = run(args.turns, args.running_steps or None, Path(logs))
    print("| per step | statements | round trips | commits | rows written | WAL bytes "
          "(records, full pages) | WAL by LSN, shared server |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print(f"| {args.turns} turns, cap {args.running_steps or 'none'} | "
          f"{result['statements']:.2f} | {result['round_trips']:.2f} | {result['commits']:.2f} | "
          f"{result['rows']:.1f} | {result['wal_bytes']:,.0f} ({result['wal_records']:.1f}, "
          f"{result['wal_fpi']:.2f}) | {result['lsn_bytes']:,.0f} |")


if __name__ == "__main__":
    main()
