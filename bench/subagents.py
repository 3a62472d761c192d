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

import sys
from collections.abc import Callable
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
from bench.cpu import less, per_turn, print_rows  # noqa: E402
from bench.places import postgres_database  # noqa: E402
from tests.support.drive import Recorder, drain  # noqa: E402

SCOPE = Scope(tenant="bench", user="bench")
LOCAL = {"script": [{"tool_calls": [{"name": "noop", "args": {}}]}, {"text": "ok"}]}
DELEGATE = {"agents": ["helper"],
            "script": [{"tool_calls": [{"name": "helper", "args": {"input": "hi"}}]},
                       {"text": "ok"}]}


def _turn(store: Store, runtime: Runtime, commands: Commands, settings: dict
          ) -> Callable[[], Callable[[], None]]:
    def one() -> Callable[[], None]:
        cid = commands.create_conversation(SCOPE, settings).id

        def run() -> None:
            drain(runtime, commands.post_message(cid, "go", SCOPE)[1])
            assert store.conversations.load(cid).fsm.rounds == 2
        return run
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
            script=[{"text": "hello"}])), now=commands.clock())
        local = per_turn(_turn(store, runtime, commands, LOCAL), turns, engine=store.engine)
        delegated = per_turn(_turn(store, runtime, commands, DELEGATE), turns,
                             engine=store.engine)
        store.dispose()
    print_rows((("local @tool", local), ("sub-agent", delegated),
                ("sub-agent adds", less(delegated, local))), width=15)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
