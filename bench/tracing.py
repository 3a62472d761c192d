"""What tracing costs a worker: CPU per step with tracing off, and on (every trace sampled,
spans and the GenAI metrics exported over OTLP/HTTP to a receiver in this process).

A turn is model -> no-op tool -> model with the scripted provider, on one real worker
process (threads pool); each mode gets a fresh database and Redis db and the same turns,
several conversations one after the other (fresh history, so a step's cost is not its
history's). CPU is the worker's (its process group, from /proc): on a shared machine
compare by it, not by wall time. Each mode runs `--rounds` times, alternating, and the
table shows every round so the spread is visible.

    python bench/tracing.py [--turns 60] [--rounds 2]

Needs the `otel` extra (`pip install -e '.[otel]'`), Postgres and Redis on localhost.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cpu import groups_cpu_s  # noqa: E402
from bench.places import postgres_database, redis_database  # noqa: E402
from bench.steps import SCOPE, SETTINGS, run_turns, sending, warm_up  # noqa: E402
from tests.support.otlp import OtlpReceiver  # noqa: E402
from tests.support.processes import WorkerProcess, worker_env  # noqa: E402

STEPS_PER_TURN = 3
TURNS_PER_CONVERSATION = 5


def tracing_env(receiver: OtlpReceiver) -> dict[str, str]:
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_TRACES_SAMPLER": "always_on",
            "OTEL_SERVICE_NAME": "agentq-bench"}


def one_run(turns: int, log_dir: Path, env: dict[str, str]) -> tuple[float, float]:
    """(worker CPU ms per step, wall ms per turn) over `turns` turns."""
    with postgres_database() as db_url, redis_database() as broker_url, \
            sending(db_url, broker_url) as (_store, app, commands, send, reply):
        worker = WorkerProcess(worker_env(db_url, broker_url, broker_url, **env),
                               log_dir / "worker.log", name="bench-tracing", concurrency=4).start()
        try:
            warm_up(app, reply)
            warm = commands.create_conversation(SCOPE, SETTINGS).id
            run_turns(commands, send, warm, 3)
            before_cpu, before = groups_cpu_s([worker.pid]), time.perf_counter()
            for done in range(0, turns, TURNS_PER_CONVERSATION):
                cid = commands.create_conversation(SCOPE, SETTINGS).id
                run_turns(commands, send, cid, min(TURNS_PER_CONVERSATION, turns - done))
            cpu_s, wall_s = groups_cpu_s([worker.pid]) - before_cpu, time.perf_counter() - before
        finally:
            worker.stop()
    return 1000 * cpu_s / (turns * STEPS_PER_TURN), 1000 * wall_s / turns


def off_path_us(samples: int = 200_000) -> float:
    """Microseconds a step spends in the span helpers while tracing is off: the lifecycle's
    check and span, a chat or tool span, an outcome."""
    from agentq.telemetry import tracing

    def one_step() -> None:
        tracer = tracing()
        with tracer.step("llm", {}, traceparent=None) as span:
            if tracing().enabled:
                raise AssertionError("tracing is on in the bench process")
            with tracing().tool({}):
                pass
            span.outcome("succeeded")

    return 1e6 * timeit.timeit(one_step, number=samples) / samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    rows: dict[str, list[tuple[float, float]]] = {"off": [], "on (100% sampled)": []}
    with OtlpReceiver() as receiver, tempfile.TemporaryDirectory() as log_dir:
        for _ in range(args.rounds):
            rows["off"].append(one_run(args.turns, Path(log_dir), {}))
            rows["on (100% sampled)"].append(one_run(args.turns, Path(log_dir),
                                                     tracing_env(receiver)))
        spans = receiver.snapshot()
    steps = [s for s in spans if s.name.startswith("step ")]
    print(f"{args.turns} turns x {STEPS_PER_TURN} steps per run, {args.rounds} runs per mode\n")
    print("| tracing | worker CPU ms per step (each run) | mean | wall ms per turn (mean) |")
    print("| --- | --- | --- | --- |")
    for mode, runs in rows.items():
        cpu = [run[0] for run in runs]
        print(f"| {mode} | {' / '.join(f'{c:.2f}' for c in cpu)} | {statistics.mean(cpu):.2f} | "
              f"{statistics.mean(run[1] for run in runs):.1f} |")
    print(f"\nspans received: {len(spans)} ({len(steps)} step spans, "
          f"{sum(s.name.startswith('chat ') for s in spans)} chat, "
          f"{sum(s.name.startswith('execute_tool ') for s in spans)} execute_tool); "
          f"metrics: {sorted(receiver.metrics)}")
    print(f"span helpers with tracing off: {off_path_us():.2f} µs per step (in this process)")


if __name__ == "__main__":
    main()
