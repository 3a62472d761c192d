"""What a handoff costs over a plain round, as the runtime makes each.

Turns run with the scripted provider and no delay, on Postgres, every step in this process
one after another (no broker: `tests.support.drive.drain`), so the figures are the
runtime's and the database's work alone. A turn of one plain model round, and two turns
of two model rounds each:

- `local @tool`: the model calls a no-op `@tool` (one tool step), then answers;
- `handoff`: the model calls `transfer_to_helper`: its result and the handoff event are
  written in the model step's commit (the helper agent's version is read and admitted
  first), and the helper's model answers in the next round;
- and, to see what holding a conversation costs afterwards, a second turn (one round) in
  a conversation handed to the helper, beside a second turn in one that was not (the
  held conversation's row carries the helper's settings in its cached state).

Each turn runs in a new conversation, so history stays the same. Prints per turn: latency
(p50, p95) and CPU of this process and of the database's backends, then the differences.

    python -m bench.handoffs [turns]
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
from bench.subagents import _backends_cpu_s  # noqa: E402
from tests.support.drive import Recorder, drain  # noqa: E402

SCOPE = Scope(tenant="bench", user="bench")
SYSTEM = "You answer questions about invoices. " * 20  # settings of a realistic size
LOCAL = {"system": SYSTEM, "tools": ["noop"],
         "script": [{"tool_calls": [{"name": "noop", "args": {}}]}, {"text": "ok"}],
         "script_repeat": True}
HANDOFF = {"system": SYSTEM, "handoffs": ["helper"],
           "script": [{"tool_calls": [{"name": "transfer_to_helper",
                                       "args": {"reason": "billing"}}]}]}


def _measure(store: Store, one: Callable[[], None], turns: int, *, second: bool
             ) -> dict[str, float]:
    """Per timed turn: latency (p50, p95), this process's CPU and the database's."""
    samples = []
    for index in range(turns + 5):  # the first five warm the caches and the pool
        before = one() if second else None
        cpu0, db0 = process_cpu_s(os.getpid()), _backends_cpu_s(store)
        started = time.perf_counter()
        (before or one)()
        elapsed = time.perf_counter() - started
        cpu, db = process_cpu_s(os.getpid()) - cpu0, _backends_cpu_s(store) - db0
        if index >= 5:
            samples.append((elapsed, cpu, db))
    latencies = sorted(s[0] for s in samples)
    return {"p50_ms": 1000 * statistics.median(latencies),
            "p95_ms": 1000 * latencies[int(0.95 * (len(latencies) - 1))],
            "cpu_ms": 1000 * sum(s[1] for s in samples) / turns,
            "db_cpu_ms": 1000 * sum(s[2] for s in samples) / turns}


def _turn(store: Store, runtime: Runtime, commands: Commands, settings: dict, *,
          second: bool) -> Callable[[], Any]:
    """A turn of a new conversation; with `second`, the first turn is run now and what is
    returned runs the second."""
    def turn(cid: str) -> None:
        drain(runtime, commands.post_message(cid, "go", SCOPE)[1])
        info = store.conversations.load(cid)
        assert info.fsm.state == "idle"
        assert (info.fsm.agent is not None) == ("handoffs" in settings)

    def one() -> Any:
        cid = commands.create_conversation(SCOPE, settings).id
        if not second:
            return turn(cid)
        turn(cid)
        return lambda: turn(cid)
    return one


def main(turns: int = 200) -> None:
    with postgres_database() as url:
        store = Store.open(url)
        store.migrate()
        registry = Registry.from_modules(["agentq.tools.demo", "tests.support.tools_for_tests"])
        runtime = Runtime(store=store, registry=registry, pubsub=Recorder(), config=Config(),
                          sleep=lambda s: None)
        commands = Commands(store, registry)
        store.agents.create("bench", AgentDefinition(name="helper", settings=Settings(
            system=SYSTEM, script=[{"text": "hello"}], script_repeat=True)), now=commands.clock())
        plain = {**LOCAL, "script": [{"text": "ok"}]}
        measured = {
            name: _measure(store, _turn(store, runtime, commands, settings, second=second),
                           turns, second=second)
            for name, settings, second in (
                ("plain", plain, False), ("local", LOCAL, False), ("handoff", HANDOFF, False),
                ("next", plain, True), ("held", HANDOFF, True))}
        store.dispose()
    def less(a: str, b: str) -> dict[str, float]:
        return {k: measured[a][k] - measured[b][k] for k in measured[a]}

    rows = (("one round", measured["plain"]), ("local @tool", measured["local"]),
            ("handoff", measured["handoff"]),
            ("handoff - 1 rnd", less("handoff", "plain")),
            ("handoff - @tool", less("handoff", "local")),
            ("next turn", measured["next"]), ("held next turn", measured["held"]),
            ("held adds", less("held", "next")))
    for label, row in rows:
        print(f"{label:15} turn p50 {row['p50_ms']:7.2f} ms  p95 {row['p95_ms']:7.2f} ms  "
              f"CPU {row['cpu_ms']:6.2f} ms + database {row['db_cpu_ms']:6.2f} ms per turn")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
