"""How many conversations a deployment carries, and the CPU each step burns.

N conversations run T turns each, all at once (a turn is model -> no-op tool -> model with
the scripted provider; the model takes `--delay` seconds per call, 0.5 s by default, the
tool is instant). The final answer is about 300 tokens (`--words`) streamed as `--chunks`
deltas spread over the call, 300 by default, as a real model streams it; `--chunks 1`
streams it in one piece. Each conversation posts its next message when its turn ends. Prints
turns/s, turn p50 / p99, and CPU seconds per step from /proc: the worker processes (and
their pool children), the PostgreSQL backends of the run's database, and Redis
(`INFO cpu`; shared with anything else on that server). CPU per step varies far less from
run to run than wall time, so compare changes by it, runs interleaved, load beside them.

    python bench/capacity.py [--conversations 100] [--turns 3] [--delay 0.5]
                             [--chunks 300] [--words 300] [--delta-window S]
                             [--workers 2] [--pool gevent] [--concurrency 1000]

`--delta-window` sets the workers' AGENTQ_DELTA_WINDOW_S (0: each delta published at once).

PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379); the database is dropped at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
from sqlalchemy import Engine  # noqa: E402

from agentq.commands import Commands  # noqa: E402
from agentq.store import Store  # noqa: E402
from agentq.core.scope import Scope  # noqa: E402
from bench.cpu import group_pids, process_cpu_s  # noqa: E402
from bench.places import postgres_database, redis_database  # noqa: E402
from bench.steps import sending, warm_up  # noqa: E402
from tests.support.processes import WorkerProcess, worker_env  # noqa: E402

SCOPE = Scope(tenant="bench", user="bench")
EVENTS_PER_TURN = 5  # user_msg, assistant_msg, tool_call, tool_result, assistant_msg
STEPS_PER_TURN = 3  # llm, tool, llm


def answer_text(words: int) -> str:
    """A final answer of about `words` tokens: short words, one token each."""
    return " ".join(f"w{n % 100}" for n in range(words))


def settings(delay_s: float, chunks: int = 1, words: int = 1) -> dict:
    return {"script": [{"tool_calls": [{"name": "noop", "args": {}}], "delay_s": delay_s},
                       {"text": answer_text(words), "chunks": chunks, "delay_s": delay_s}],
            "script_repeat": True}


# -- CPU from /proc -------------------------------------------------------------------------

class CpuMeter:
    """CPU seconds of the workers, the run's PostgreSQL backends and Redis since `start`."""

    def __init__(self, engine: Engine, reply: redis.Redis, workers: list[WorkerProcess]) -> None:
        self.engine, self.reply, self.workers = engine, reply, workers
        self._start: dict[str, dict[int, float] | float] = {}

    def _backends(self) -> dict[int, float]:
        with self.engine.connect() as conn:
            pids = conn.exec_driver_sql(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid()").scalars().all()
        return {pid: process_cpu_s(pid) for pid in pids}

    def _workers(self) -> dict[int, float]:
        return {pid: process_cpu_s(pid) for w in self.workers for pid in group_pids(w.pid)}

    def _redis(self) -> float:
        info = self.reply.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    def start(self) -> None:
        self._start = {"workers": self._workers(), "postgres": self._backends(),
                       "redis": self._redis()}

    def since_start(self) -> dict[str, float]:
        """CPU seconds per part; a process that appeared since `start` counts from zero."""
        used = {}
        for part, now in (("workers", self._workers()), ("postgres", self._backends())):
            before = self._start[part]
            used[part] = sum(cpu - before.get(pid, 0.0) for pid, cpu in now.items())
        used["redis"] = self._redis() - self._start["redis"]
        return used


# -- the run --------------------------------------------------------------------------------

def run_conversations(store: Store, commands: Commands, send, ids: list[str],
                      turns: int, timeout_s: float) -> list[float]:
    """Every conversation runs `turns` turns, the next posted as the last ends; turn times."""
    started: dict[str, float] = {}
    done_turns = {cid: 0 for cid in ids}
    took: list[float] = []

    def post(cid: str) -> None:
        started[cid] = time.perf_counter()
        send(commands.post_message(cid, "go", SCOPE)[1])

    for cid in ids:
        post(cid)
    deadline = time.monotonic() + timeout_s
    with store.engine.connect() as conn:
        while any(n < turns for n in done_turns.values()):
            if time.monotonic() > deadline:
                stuck = sum(1 for n in done_turns.values() if n < turns)
                raise TimeoutError(f"{stuck} conversation(s) did not finish their turns")
            rows = conn.exec_driver_sql(
                "SELECT id, next_seq FROM conversations WHERE tenant = 'bench'").all()
            conn.rollback()
            for cid, next_seq in rows:
                cid = str(cid)
                finished = (next_seq - 1) // EVENTS_PER_TURN
                if cid in done_turns and finished > done_turns[cid]:
                    done_turns[cid] = finished
                    took.append(time.perf_counter() - started[cid])
                    if finished < turns:
                        post(cid)
            time.sleep(0.01)
    return took


def bench(args) -> dict:
    with postgres_database() as db_url, redis_database() as broker_url, \
            tempfile.TemporaryDirectory() as logs, \
            sending(db_url, broker_url) as (store, app, commands, send, reply):
        window = {} if args.delta_window is None else {
            "AGENTQ_DELTA_WINDOW_S": str(args.delta_window)}
        env = worker_env(db_url, broker_url, broker_url, AGENTQ_TOOLS="agentq.tools.demo",
                         **window)
        workers = [WorkerProcess(env, Path(logs) / f"w{i}.log", name=f"capacity{i}",
                                 pool=args.pool, concurrency=args.concurrency).start()
                   for i in range(args.workers)]
        try:
            warm_up(app, reply)
            ids = [commands.create_conversation(
                       SCOPE, settings(args.delay, args.chunks, args.words)).id
                   for _ in range(args.conversations)]
            meter = CpuMeter(store.engine, reply, workers)
            meter.start()
            load_before = os.getloadavg()[0]
            start = time.perf_counter()
            took = run_conversations(store, commands, send, ids, args.turns, args.timeout)
            wall_s = time.perf_counter() - start
            cpu = meter.since_start()
        finally:
            for worker in workers:
                worker.stop()
    steps = args.conversations * args.turns * STEPS_PER_TURN
    took.sort()
    return {
        "deployment": f"{args.workers} x -P {args.pool} -c {args.concurrency}",
        "conversations": args.conversations, "turns": args.turns, "delay_s": args.delay,
        "chunks": args.chunks, "words": args.words, "delta_window_s": args.delta_window,
        "turns_per_s": len(took) / wall_s,
        "turn_p50_s": statistics.median(took),
        "turn_p99_s": took[min(len(took) - 1, int(0.99 * len(took)))],
        "cpu_ms_per_step": {part: 1000 * s / steps for part, s in cpu.items()},
        "cpu_ms_per_step_total": 1000 * sum(cpu.values()) / steps,
        "load1": [load_before, os.getloadavg()[0]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--delay", type=float, default=0.5, help="seconds per model call")
    parser.add_argument("--chunks", type=int, default=300,
                        help="deltas the final answer streams in")
    parser.add_argument("--words", type=int, default=300, help="tokens of the final answer")
    parser.add_argument("--delta-window", type=float, default=None,
                        help="the workers' AGENTQ_DELTA_WINDOW_S (default: theirs)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--pool", default="gevent")
    parser.add_argument("--concurrency", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()
    os.environ.setdefault("AGENTQ_TOOLS", "agentq.tools.demo")
    result = bench(args)
    if args.json:
        print(json.dumps(result))
        return
    cpu = result["cpu_ms_per_step"]
    print("| deployment | conversations x turns, model s | chunks, window s | turns/s | "
          "turn p50 / p99 s | CPU ms/step: workers + postgres + redis = total | "
          "load1 before, after |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print(f"| {result['deployment']} | {args.conversations} x {args.turns}, {args.delay} | "
          f"{args.chunks}, {args.delta_window if args.delta_window is not None else 'default'} | "
          f"{result['turns_per_s']:.1f} | {result['turn_p50_s']:.2f} / {result['turn_p99_s']:.2f} | "
          f"{cpu['workers']:.2f} + {cpu['postgres']:.2f} + {cpu['redis']:.2f} = "
          f"{result['cpu_ms_per_step_total']:.2f} | "
          f"{result['load1'][0]:.2f}, {result['load1'][1]:.2f} |")


if __name__ == "__main__":
    main()
