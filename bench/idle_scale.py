"""Idle conversations must not change what a step or a sweep costs: measured before and after
seeding the database with many of them.

Seeds `--idle` conversations (100,000 by default) of the measured tenant, each a finished
turn (a model step that called a tool, the tool step, the model step that answered: its
events, its tool call, its inbox row and its three succeeded steps), copied in bulk from a
real one. Before and after seeding it prints, on PostgreSQL:

- the process CPU and the SQL statements per step of a conversation run in-process
  (model -> no-op tool -> model, scripted, no delay), over `--turns` turns;
- the time each query of the sweeper takes (median of `--repeat` runs): the full sweep
  (`repair.sweep`), and the deadline and due-window reads of the `Sweeper`;
- with `--explain`, each sweeper query's plan after seeding, and whether it reads a whole
  table (a `Seq Scan` on one that grows with conversations).

    python bench/idle_scale.py [--idle 100000] [--turns 30] [--repeat 20] [--explain]

PostgreSQL (127.0.0.1:5432); the database is dropped at the end.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import event, text  # noqa: E402

from agentq.commands import Commands  # noqa: E402
from agentq.config import Config  # noqa: E402
from agentq.runtime import repair  # noqa: E402
from agentq.store.schema import metadata  # noqa: E402
from agentq.worker.wiring import build_runtime  # noqa: E402
from bench.places import postgres_database  # noqa: E402
from bench.steps import SCOPE, SETTINGS  # noqa: E402
from tests.support.drive import drain  # noqa: E402

# The rows of one finished conversation, and how a copy's keys are made unique: each
# column named here gets the copy's number appended.
COPIED = {
    "conversations": ("id",),
    "events": ("id", "conversation_id"),
    "inbox": ("id", "conversation_id"),
    "tool_calls": ("conversation_id",),
    "steps": ("step_key", "conversation_id"),
}
# Seq Scans on these grow with the number of conversations.
GROWING = ("conversations", "events", "inbox", "tool_calls", "steps")


def seed(engine, template: str, count: int) -> float:
    """Copy the template conversation `count` times, updated a day ago; the seconds it took."""
    start = time.perf_counter()
    with engine.begin() as conn:
        for name, renamed in COPIED.items():
            table = metadata.tables[name]
            key = "id" if name == "conversations" else "conversation_id"
            columns = [c.name for c in table.c]
            values = [
                f"left({c}, 40) || '-idle-' || g" if c in renamed
                else f"{c} - interval '1 day'" if c in ("created_at", "updated_at", "finished_at",
                                                        "started_at", "taken_at", "resolved_at")
                else c
                for c in columns
            ]
            conn.execute(text(
                f"INSERT INTO {name} ({', '.join(columns)}) "
                f"SELECT {', '.join(values)} FROM {name}, generate_series(1, :count) AS g "
                f"WHERE {key} = :template"
            ), {"count": count, "template": template})
    with engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("ANALYZE"))
    return time.perf_counter() - start


def per_step(runtime, commands: Commands, cid: str, turns: int) -> tuple[float, float]:
    """(CPU ms, SQL statements) per step of this process, over `turns` turns of `cid`; the
    posts are the API's, not the steps', and count in neither."""
    counted = {"on": False, "statements": 0}

    def count(*_args) -> None:
        counted["statements"] += counted["on"]

    event.listen(runtime.store.engine, "before_cursor_execute", count)
    cpu = 0.0
    try:
        for _ in range(turns):
            _, follow = commands.post_message(cid, "go", SCOPE)
            counted["on"], start = True, time.process_time()
            drain(runtime, follow)
            cpu += time.process_time() - start
            counted["on"] = False
    finally:
        event.remove(runtime.store.engine, "before_cursor_execute", count)
    steps = 3 * turns
    return 1000 * cpu / steps, counted["statements"] / steps


def sweeper_queries(runtime) -> dict[str, object]:
    """The sweeper's reads, each a callable, as the sweeper makes them."""
    store, now = runtime.store, runtime.clock()
    ctx = runtime._ctx  # noqa: SLF001 - the bench times the sweep's own reads
    earlier = now - timedelta(seconds=60)
    return {
        "full sweep (repair.sweep)": lambda: repair.sweep(ctx),
        "  overdue calls": lambda: store.backlog.list_overdue_calls(now=now),
        "  stale steps": lambda: store.backlog.list_stale_steps(now=now, scheduled_before=earlier),
        "  waiting steps": lambda: store.backlog.list_waiting_steps(now=now),
        "  stalled conversations": lambda: store.backlog.list_stalled_conversations(
            updated_before=earlier, now=now),
        "due window (repair.sweep_due)": lambda: repair.sweep_due(
            ctx, after=earlier, now=now, grace_s=5.0),
    }


def time_queries(runtime, repeat: int) -> dict[str, float]:
    took = {}
    for name, query in sweeper_queries(runtime).items():
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            query()
            samples.append(time.perf_counter() - start)
        took[name] = 1000 * statistics.median(samples)
    return took


def explain(runtime) -> list[tuple[str, list[str]]]:
    """Each sweeper query's plan, caught as the store sends it."""
    plans: list[tuple[str, list[str]]] = []
    engine = runtime.store.engine
    seen: list[tuple[str, object]] = []

    def catch(conn, cursor, statement, parameters, context, executemany) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", catch)
    try:
        for query in list(sweeper_queries(runtime).values())[1:-1]:
            query()
    finally:
        event.remove(engine, "before_cursor_execute", catch)
    with engine.connect() as conn:
        for statement, parameters in seen:
            cursor = conn.connection.driver_connection.cursor()
            cursor.execute("EXPLAIN " + statement, parameters)
            tables = re.findall(r"FROM (\w+)", statement)
            plans.append((tables[0] if tables else "?", [row[0] for row in cursor.fetchall()]))
    return plans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--idle", type=int, default=100_000)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--explain", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("AGENTQ_TOOLS", "agentq.tools.demo")
    with postgres_database() as db_url:
        runtime = build_runtime(Config(database_url=db_url, redis_url="embedded://bench-idle"))
        runtime.store.migrate()
        commands = Commands(runtime.store, runtime.registry)
        template = commands.create_conversation(SCOPE, SETTINGS).id
        drain(runtime, commands.post_message(template, "go", SCOPE)[1])
        cid = commands.create_conversation(SCOPE, SETTINGS).id
        drain(runtime, commands.post_message(cid, "warm up", SCOPE)[1])
        rows = {"before": (per_step(runtime, commands, cid, args.turns), time_queries(runtime, args.repeat))}
        seeded_s = seed(runtime.store.engine, template, args.idle)
        drain(runtime, commands.post_message(cid, "warm up", SCOPE)[1])
        rows["after"] = (per_step(runtime, commands, cid, args.turns),
                         time_queries(runtime, args.repeat))
        plans = explain(runtime) if args.explain else []
        runtime.store.dispose()
    print(f"\n{args.idle:,} idle conversations seeded in {seeded_s:.0f} s\n")
    print("| measure | before | after |")
    print("| --- | --- | --- |")
    (cpu_b, sql_b), took_b = rows["before"]
    (cpu_a, sql_a), took_a = rows["after"]
    print(f"| CPU ms per step (this process) | {cpu_b:.2f} | {cpu_a:.2f} |")
    print(f"| SQL statements per step | {sql_b:.2f} | {sql_a:.2f} |")
    for name in took_b:
        print(f"| {name.strip()}, ms (median) | {took_b[name]:.2f} | {took_a[name]:.2f} |")
    for table, plan in plans:
        scans = [line.strip() for line in plan if "Seq Scan on" in line
                 and any(f"Seq Scan on {t} " in line + " " for t in GROWING)]
        print(f"\n{table}: {'reads a whole table: ' + '; '.join(scans) if scans else 'indexed'}")
        for line in plan:
            print("    " + line)


if __name__ == "__main__":
    main()
