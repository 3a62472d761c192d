"""What a sub-agent call costs over a local tool call, as the runtime makes each.

One turn is model -> call -> model with the scripted provider and no delay, on Postgres,
every step run in this process one after another (no broker: `tests.support.drive.drain`),
so the figures are the runtime's and the database's work alone. The local call is a no-op
`@tool` (one tool step). The sub-agent call is an agent whose script answers at once: its
tool step starts the child in the parent's commit, the child's one model step ends its
turn and schedules the handover, and the handover step closes the parent's call (three
steps, five transactions, where the local call has one step). Each turn runs in a new
conversation, so history stays the same. Prints per turn: latency (p50, p95) and CPU of
this process and of the database's backends, then the difference: what one sub-agent call
adds. With real workers each extra step is also one more task on the broker (its floor is
in `bench/floor.py`).

    python -m bench.subagents [turns]
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentq.commands import Commands  # noqa: E402
from agentq.config import Config  # noqa: E402
from agentq.core.agents import AgentDefinition  # noqa: E402
from agentq.core.scope import Scope  # noqa: E402
from agentq.core.settings import Settings  # noqa: E402
from agentq.runtime import Runtime  # noqa: E402
from agentq.store import Store  # noqa: E402
from agentq.tools import Registry  # noqa: E402
from bench.cpu import process_cpu_s  # noqa: E402
from bench.places import postgres_database  # noqa: E402
from tests.support.drive import Recorder, drain  # noqa: E402

SCOPE = Scope(tenant="bench", user="bench")
LOCAL = {"script": [{"tool_calls": [{"name": "noop", "args": {}}]}, {"text": "ok"}]}
DELEGATE = {"agents": ["helper"],
            "script": [{"tool_calls": [{"name": "helper", "args": {"input": "hi"}}]},
                       {"text": "ok"}]}


def _backends_cpu_s(store: Store) -> float:
    with store.engine.connect() as conn:
        pids = conn.exec_driver_sql(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()").scalars().all()
    return sum(process_cpu_s(pid) for pid in pids)


def _turns(store: Store, runtime: Runtime, commands: Commands, settings: dict, turns: int
           ) -> dict[str, float]:
    def one() -> float:
        conv = commands.create_conversation(SCOPE, settings)
        started = time.perf_counter()
        drain(runtime, commands.post_message(conv.id, "go", SCOPE)[1])
        elapsed = time.perf_counter() - started
        assert store.conversations.load(conv.id).fsm.rounds == 2
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
        registry = Registry.from_modules(["agentq.tools.demo", "tests.support.tools_for_tests"])
        runtime = Runtime(store=store, registry=registry, pubsub=Recorder(), config=Config(),
                          sleep=lambda s: None)
        commands = Commands(store, registry)
        store.agents.create("bench", AgentDefinition(name="helper", settings=Settings(
            script=[{"text": "hello"}])), now=commands.clock())
        local = _turns(store, runtime, commands, LOCAL, turns)
        delegated = _turns(store, runtime, commands, DELEGATE, turns)
        store.dispose()
    rows = (("local @tool", local), ("sub-agent", delegated),
            ("sub-agent adds", {k: delegated[k] - local[k] for k in local}))
    for label, row in rows:
        print(f"{label:15} turn p50 {row['p50_ms']:7.2f} ms  p95 {row['p95_ms']:7.2f} ms  "
              f"CPU {row['cpu_ms']:6.2f} ms + database {row['db_cpu_ms']:6.2f} ms per turn")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
