"""What one agentq step costs, through real worker processes.

A turn is model -> no-op tool -> model with the scripted provider and no delay. Prints:
turns per second (one conversation; 50 at once on two workers), the time one step
adds next to the floor measured in the same run (an empty Celery task hop on the same
broker plus one insert-and-commit), SQL statements and write transactions per step,
and time and Postgres WAL bytes per turn (medians of the 20 turns up to each mark) and the
worker's CPU per turn (mean over those turns, from /proc: compare changes by it on a busy
machine) at growing history, without compaction and with it.

    python bench/steps.py [--turns 40] [--history 10,100,1000] [--skip-postgres]
                          [--running-steps N]

`--running-steps N` runs every step under a tenant cap of N (the policy's `running_steps`),
so the capped claim and the wake-up after each step are measured; N above the number of
worker slots never makes a step wait.

Postgres (127.0.0.1:5432) and Redis (127.0.0.1:6379) for the first tables; the
embedded table needs nothing. Every database it makes is dropped at the end.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
from sqlalchemy import event  # noqa: E402

from agentq.commands import Commands  # noqa: E402
from agentq.config import Config  # noqa: E402
from agentq.worker.embedded import Embedded  # noqa: E402
from agentq.store import Store  # noqa: E402
from bench.cpu import groups_cpu_s  # noqa: E402
from bench.places import postgres_database, redis_database  # noqa: E402
from agentq.tools import Registry  # noqa: E402
from agentq.core.scope import Scope  # noqa: E402
from agentq.worker.wiring import build_runtime  # noqa: E402
from agentq.worker.factory import create_celery  # noqa: E402
from agentq.worker.tasks import enqueue  # noqa: E402
from tests.support.drive import drain  # noqa: E402
from tests.support.processes import WorkerProcess, worker_env  # noqa: E402

SCOPE = Scope(tenant="bench", user="bench")
SETTINGS = {
    "script": [{"tool_calls": [{"name": "noop", "args": {}}]}, {"text": "ok"}],
    "script_repeat": True,
}
# The same conversation with compaction: a model call sees a summary and the last turns.
# With 256 tokens the summary and the kept turns fill the budget, so this conversation
# writes a summary about every turn: the costliest way to keep a step's cost flat.
COMPACTION_TOKENS = 256
COMPACTED = {**SETTINGS, "compaction": {"max_context_tokens": COMPACTION_TOKENS, "min_keep_turns": 2}}


# -- places to run --------------------------------------------------------------------------

@contextlib.contextmanager
def worker_processes(count: int, db_url: str, broker_url: str, log_dir: Path):
    env = worker_env(db_url, broker_url, broker_url)
    workers = [
        WorkerProcess(env, log_dir / f"w{i}.log", name=f"bench{i}", concurrency=4).start()
        for i in range(count)
    ]
    try:
        yield workers
    finally:
        for worker in workers:
            worker.stop()


# -- measurements ---------------------------------------------------------------------------

def wait_rounds(store: Store, cid: str, rounds: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        fsm = store.conversations.load(cid).fsm
        if fsm.rounds >= rounds and fsm.state == "idle":
            return
        time.sleep(0.002)
    raise TimeoutError(f"conversation {cid} did not reach {rounds} rounds")


def run_turns(commands: Commands, send, cid: str, turns: int) -> list[float]:
    """Run `turns` turns one after the other; the seconds each took."""
    store = commands.store
    took = []
    for _ in range(turns):
        rounds = store.conversations.load(cid).fsm.rounds
        start = time.perf_counter()
        _, follow = commands.post_message(cid, "go", SCOPE)
        send(follow)
        wait_rounds(store, cid, rounds + 2)
        took.append(time.perf_counter() - start)
    return took


def run_concurrent(commands: Commands, send, count: int, turns: int) -> float:
    """Turns per second with `count` conversations running at once."""
    store = commands.store
    ids = [commands.create_conversation(SCOPE, SETTINGS).id for _ in range(count)]
    start = time.perf_counter()
    for turn in range(1, turns + 1):
        for cid in ids:
            _, follow = commands.post_message(cid, "go", SCOPE)
            send(follow)
        for cid in ids:
            wait_rounds(store, cid, 2 * turn, timeout_s=300)
    return count * turns / (time.perf_counter() - start)


def step_added_s(store: Store, cid: str) -> list[float]:
    """For every step: its commit time minus the previous commit (or the message) time."""
    events = store.log.list_events(cid)
    starts = {e.turn_id: e.created_at for e in events if e.type == "user_msg"}
    turn_of = {e.step_key: e.turn_id for e in events if e.step_key}
    added, last_turn, last_at = [], None, None
    for step in sorted(store.steps.list_of(cid), key=lambda s: s.finished_at):
        turn = turn_of.get(step.step_key)
        previous = last_at if turn == last_turn else starts[turn]
        added.append((step.finished_at - previous).total_seconds())
        last_turn, last_at = turn, step.finished_at
    return added


def fresh_steps_s(commands: Commands, send, conversations: int = 10, turns: int = 3) -> list[float]:
    """The time each step adds, early in new conversations, where history is short.

    Deep into a conversation a model step also reads and renders the whole history (the
    growth table shows it; compaction bounds it), which is not the cost of a step itself.
    """
    added = []
    for _ in range(conversations):
        cid = commands.create_conversation(SCOPE, SETTINGS).id
        run_turns(commands, send, cid, turns)
        added.extend(step_added_s(commands.store, cid))
    return added


def hop_s(app, reply: redis.Redis, samples: int, timeout_s: int = 10) -> list[float]:
    """An empty Celery task from send to run, on the same broker and workers."""
    took = []
    for _ in range(samples):
        key = f"agentq:bench:{uuid.uuid4().hex}"
        start = time.perf_counter()
        app.send_task("agentq.ping", args=[key])
        if reply.blpop([key], timeout=timeout_s) is None:
            raise TimeoutError("no worker answered the ping")
        took.append(time.perf_counter() - start)
    return took


def warm_up(app, reply: redis.Redis) -> None:
    """Wait for the workers to take tasks, then a few hops to settle."""
    hop_s(app, reply, 1, timeout_s=60)
    hop_s(app, reply, 10)


def insert_commit_s(engine, samples: int) -> list[float]:
    """One row inserted and committed, on the same database."""
    took = []
    with engine.connect() as conn:
        conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS bench_floor (id TEXT PRIMARY KEY, at TEXT)")
        conn.commit()
        for _ in range(samples):
            start = time.perf_counter()
            conn.exec_driver_sql(
                "INSERT INTO bench_floor (id, at) VALUES (%s, %s)"
                if engine.dialect.name == "postgresql" else
                "INSERT INTO bench_floor (id, at) VALUES (?, ?)",
                (uuid.uuid4().hex, "now"),
            )
            conn.commit()
            took.append(time.perf_counter() - start)
    return took


def count_sql_per_step(db_url: str, turns: int = 20) -> dict[str, float]:
    """Statements and write transactions per step, runtime run in-process on `db_url`."""
    config = Config(database_url=db_url, redis_url="embedded://bench-count",
                    policy_path=os.environ.get("AGENTQ_POLICY"))
    runtime = build_runtime(config)
    runtime.store.migrate()
    commands = Commands(runtime.store, runtime.registry)
    cid = commands.create_conversation(SCOPE, SETTINGS).id
    drain(runtime, commands.post_message(cid, "warm up", SCOPE)[1])
    counts = {"statements": 0, "writes": 0}

    @event.listens_for(runtime.store.engine, "before_cursor_execute")
    def _statement(*_args):
        counts["statements"] += 1

    @event.listens_for(runtime.store.engine, "commit")
    def _commit(conn):
        if not conn.get_execution_options().get("agentq_read"):
            counts["writes"] += 1

    in_steps = {"statements": 0, "writes": 0}
    for _ in range(turns):
        _, follow = commands.post_message(cid, "go", SCOPE)  # the command's, not a step's
        before = dict(counts)
        drain(runtime, follow)
        for name in in_steps:
            in_steps[name] += counts[name] - before[name]
    runtime.store.dispose()
    return {name: value / (3 * turns) for name, value in in_steps.items()}


GROWTH_WINDOW = 20  # turns measured up to each mark: single turns vary by 2x on a busy machine


def growth(commands: Commands, send, wal, marks: list[int], cpu: Callable[[], float],
           settings: dict = SETTINGS) -> list[tuple[int, list[float], float, float]]:
    """Per mark, over the turns up to it on one conversation: the seconds of each turn, the
    median WAL bytes per turn, and the mean CPU seconds per turn of the process(es) running
    the steps (`cpu`).

    Medians, because a checkpoint inside the window makes the turns after it write whole
    pages to the WAL, whatever the history; CPU is summed over the window, so its mean
    holds up under load where wall time does not.
    """
    cid = commands.create_conversation(SCOPE, settings).id
    rows, done = [], 0
    for mark in marks:
        window = min(GROWTH_WINDOW, mark - done)
        if mark - window > done:
            run_turns(commands, send, cid, mark - window - done)
        took, wal_bytes = [], []
        cpu_before = cpu()
        for _ in range(window):
            before = wal() if wal else 0
            took.extend(run_turns(commands, send, cid, 1))
            wal_bytes.append(wal() - before if wal else 0)
        cpu_s = (cpu() - cpu_before) / window
        done = mark
        rows.append((mark, took, statistics.median(wal_bytes), cpu_s))
    return rows


# -- report ---------------------------------------------------------------------------------

def ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(name: str, workers: str, single: list[float], concurrent: float, added: list[float],
           hop: list[float], insert: list[float], sql: dict[str, float] | None,
           growths: dict[str, list[tuple[int, list[float], float, float]]], has_wal: bool,
           cpu_of: str) -> None:
    floor_p50 = ms(hop, 0.5) + ms(insert, 0.5)
    print(f"\n## {name}\n")
    print("| measure | value |")
    print("| --- | --- |")
    print(f"| turns/s, one conversation | {len(single) / sum(single):.1f} |")
    print(f"| turns/s, 50 conversations at once, {workers} | {concurrent:.1f} |")
    print(f"| time one step adds, p50 / p99 | {ms(added, .5):.1f} / {ms(added, .99):.1f} ms |")
    print(f"| floor: task hop p50 / p99 | {ms(hop, .5):.1f} / {ms(hop, .99):.1f} ms |")
    print(f"| floor: insert+commit p50 / p99 | {ms(insert, .5):.2f} / {ms(insert, .99):.2f} ms |")
    print(f"| step p50 / floor p50 | {ms(added, .5) / floor_p50:.2f}x |")
    if sql:
        print(f"| SQL statements per step | {sql['statements']:.1f} |")
        print(f"| write transactions per step | {sql['writes']:.2f} |")
    for label, rows in growths.items():
        print(f"\n{label}\n")
        wal_column = "WAL bytes per turn, median | " if has_wal else ""
        print(f"| at turn | ms per turn, median / mean | {wal_column}"
              f"CPU ms per turn, mean ({cpu_of}) |")
        print("| --- | --- | --- |" + (" --- |" if has_wal else ""))
        for mark, took, wal_bytes, cpu_s in rows:
            wal_cell = f" {wal_bytes:,.0f} |" if has_wal else ""
            median_ms, mean_ms = 1000 * statistics.median(took), 1000 * statistics.mean(took)
            print(f"| {mark} | {median_ms:.1f} / {mean_ms:.1f} |{wal_cell} {1000 * cpu_s:.1f} |")
        first, last = rows[0], rows[-1]
        print(f"\nturn {last[0]} / turn {first[0]}: "
              f"{statistics.mean(last[1]) / statistics.mean(first[1]):.2f}x in mean time, "
              f"{last[3] / first[3]:.2f}x in CPU")


@contextlib.contextmanager
def sending(db_url: str, broker_url: str) -> Iterator[tuple]:
    """(store, app, commands, send, reply) that post turns as the API would, with workers
    elsewhere; closed at the end."""
    store = Store.open(db_url)
    store.migrate()
    app = create_celery(Config(broker_url=broker_url, redis_url=broker_url), runtime=lambda: None)
    commands = Commands(store, Registry.from_modules(["agentq.tools.demo"]))
    reply = redis.Redis.from_url(broker_url, socket_timeout=None)
    try:
        yield store, app, commands, lambda follow: enqueue(app, follow), reply
    finally:
        reply.close()
        app.close()
        store.dispose()


def bench_postgres(args, log_dir: Path) -> None:
    with postgres_database() as db_url, redis_database() as broker_url, \
            sending(db_url, broker_url) as (store, app, commands, send, reply):

        def wal() -> int:
            with store.engine.connect() as conn:
                return conn.exec_driver_sql(
                    "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')").scalar()

        with worker_processes(1, db_url, broker_url, log_dir) as workers:
            warm_up(app, reply)

            def cpu() -> float:
                return groups_cpu_s([worker.pid for worker in workers])

            cid = commands.create_conversation(SCOPE, SETTINGS).id
            run_turns(commands, send, cid, 3)
            single = run_turns(commands, send, cid, args.turns)
            added = fresh_steps_s(commands, send)
            hop = hop_s(app, reply, 100)
            insert = insert_commit_s(store.engine, 200)
            growths = {
                "Without compaction (a model call reads and sends the whole log):":
                    growth(commands, send, wal, args.history, cpu),
                f"With compaction at {COMPACTION_TOKENS} tokens (a summary and the last turns):":
                    growth(commands, send, wal, args.history, cpu, COMPACTED),
            }
        with worker_processes(2, db_url, broker_url, log_dir):
            warm_up(app, reply)
            concurrent = run_concurrent(commands, send, 50, 3)
        sql = count_sql_per_step(db_url)
        report("PostgreSQL + Redis", "2 worker processes x 4 threads", single, concurrent,
               added, hop, insert, sql, growths, True, "the worker")


def bench_embedded(args) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = Config(database_url=f"sqlite:///{tmp}/bench.db", sweep_s=5.0,
                        policy_path=os.environ.get("AGENTQ_POLICY"))
        embedded = Embedded(config)
        results = {}

        def main(emb: Embedded) -> int:
            commands, store = emb.commands, emb.runtime.store
            reply = emb.runtime.pubsub.client
            warm_up(emb.app, reply)
            cid = commands.create_conversation(SCOPE, SETTINGS).id
            run_turns(commands, emb.send, cid, 3)
            results["single"] = run_turns(commands, emb.send, cid, args.turns)
            results["added"] = fresh_steps_s(commands, emb.send)
            results["hop"] = hop_s(emb.app, reply, 100)
            results["insert"] = insert_commit_s(store.engine, 200)
            results["rows"] = {
                "Without compaction:": growth(commands, emb.send, None, args.history,
                                              time.process_time),
                f"With compaction at {COMPACTION_TOKENS} tokens:":
                    growth(commands, emb.send, None, args.history, time.process_time, COMPACTED),
            }
            results["concurrent"] = run_concurrent(commands, emb.send, 50, 3)
            return 0

        if embedded.run(main, concurrency=4) != 0:
            raise SystemExit("the embedded benchmark failed")
        sql = count_sql_per_step(f"sqlite:///{tmp}/count.db")
        report("Embedded (SQLite, memory:// broker)", "1 process x 4 worker threads",
               results["single"],
               results["concurrent"], results["added"], results["hop"], results["insert"],
               sql, results["rows"], False, "the whole process")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--history", default="10,100,1000")
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--skip-embedded", action="store_true")
    parser.add_argument("--running-steps", type=int, default=None,
                        help="cap each tenant's running steps (default: no cap)")
    args = parser.parse_args()
    args.history = [int(x) for x in args.history.split(",")]
    os.environ.setdefault("AGENTQ_TOOLS", "agentq.tools.demo")
    with tempfile.TemporaryDirectory() as logs:
        if args.running_steps is not None:  # the workers and the SQL count read it
            policy = Path(logs) / "policy.toml"
            policy.write_text(f"[ceilings]\nrunning_steps = {args.running_steps}\n")
            os.environ["AGENTQ_POLICY"] = str(policy)
        if not args.skip_postgres:
            bench_postgres(args, Path(logs))
        if not args.skip_embedded:
            bench_embedded(args)


if __name__ == "__main__":
    main()
