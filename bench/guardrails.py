"""What an input and an output guardrail cost over a plain turn, as the runtime runs them.

One turn is one model round (the scripted provider, no delay) that answers at once, on
Postgres, its steps run in this process (no broker: `tests.support.drive.drain`), so the
figures are the runtime's and the database's work alone. The guarded turn runs the same
round with one input guardrail and one output guardrail, both sync functions that pass
(`passes`, below): each runs on a guardrail thread and adds a verdict event to the step's
one commit. The parallel row runs the input guardrail beside the model call instead. Each
turn runs in a new conversation, so history stays the same. Prints per turn: latency (p50,
p95) and CPU of this process and of the database's backends, then what the guardrails add.

    python -m bench.guardrails [turns]
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import agentq  # noqa: E402
from agentq.commands import Commands  # noqa: E402
from agentq.config import Config  # noqa: E402
from agentq.core.scope import Scope  # noqa: E402
from agentq.runtime import Runtime  # noqa: E402
from agentq.store import Store  # noqa: E402
from agentq.tools import Registry  # noqa: E402
from bench.cpu import process_cpu_s  # noqa: E402
from bench.places import postgres_database  # noqa: E402
from tests.support.drive import Recorder, drain  # noqa: E402

SCOPE = Scope(tenant="bench", user="bench")
PLAIN = {"script": [{"text": "ok"}]}
GUARDED = {**PLAIN, "input_guardrails": ["passes"], "output_guardrails": ["passes"]}
PARALLEL = {**PLAIN, "input_guardrails": [{"name": "passes", "parallel": True}],
            "output_guardrails": ["passes"]}


@agentq.guardrail
def passes(text: str) -> bool:
    """A check that reads its text and never trips."""
    return "never" in text and False


def _backends_cpu_s(store: Store) -> float:
    with store.engine.connect() as conn:
        pids = conn.exec_driver_sql(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()").scalars().all()
    return sum(process_cpu_s(pid) for pid in pids)


def _turns(store: Store, runtime: Runtime, commands: Commands, settings: dict, turns: int,
           verdicts: int) -> dict[str, float]:
    def one() -> float:
        conv = commands.create_conversation(SCOPE, settings)
        started = time.perf_counter()
        drain(runtime, commands.post_message(conv.id, "go", SCOPE)[1])
        elapsed = time.perf_counter() - started
        events = store.log.list_events(conv.id)
        assert [e.type for e in events].count("guardrail") == verdicts
        assert events[-1].type == "assistant_msg"
        return elapsed

    for _ in range(5):  # warm the caches and the pool
        one()
    cpu0, db0 = process_cpu_s(os.getpid()), _backends_cpu_s(store)
    latencies = sorted(one() for _ in range(turns))
    return {"p50_ms": 1000 * statistics.median(latencies),
            "p95_ms": 1000 * latencies[int(0.95 * (len(latencies) - 1))],
            "cpu_ms": 1000 * (process_cpu_s(os.getpid()) - cpu0) / turns,
            "db_cpu_ms": 1000 * (_backends_cpu_s(store) - db0) / turns}


def main(turns: int = 200) -> None:
    with postgres_database() as url:
        store = Store.open(url)
        store.migrate()
        registry = Registry.from_modules(["agentq.tools.demo", "bench.guardrails"])
        runtime = Runtime(store=store, registry=registry, pubsub=Recorder(), config=Config(),
                          sleep=lambda s: None)
        commands = Commands(store, registry)
        plain = _turns(store, runtime, commands, PLAIN, turns, 0)
        guarded = _turns(store, runtime, commands, GUARDED, turns, 2)
        parallel = _turns(store, runtime, commands, PARALLEL, turns, 2)
        store.dispose()
    rows = (("plain turn", plain), ("in + out", guarded), ("parallel in + out", parallel),
            ("in + out add", {k: guarded[k] - plain[k] for k in plain}),
            ("parallel adds", {k: parallel[k] - plain[k] for k in plain}))
    for label, row in rows:
        print(f"{label:18} turn p50 {row['p50_ms']:7.2f} ms  p95 {row['p95_ms']:7.2f} ms  "
              f"CPU {row['cpu_ms']:6.2f} ms + database {row['db_cpu_ms']:6.2f} ms per turn")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
