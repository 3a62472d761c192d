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
SYSTEM = "You answer questions about invoices. " * 20  # settings of a realistic size
LOCAL = {"system": SYSTEM, "tools": ["noop"],
         "script": [{"tool_calls": [{"name": "noop", "args": {}}]}, {"text": "ok"}],
         "script_repeat": True}
HANDOFF = {"system": SYSTEM, "handoffs": ["helper"],
           "script": [{"tool_calls": [{"name": "transfer_to_helper",
                                       "args": {"reason": "billing"}}]}]}


def _turn(store: Store, runtime: Runtime, commands: Commands, settings: dict, *,
          second: bool) -> Callable[[], Callable[[], None]]:
    """A turn of a new conversation; with `second`, its first turn is run untimed and the
    second is the one measured."""
    def turn(cid: str) -> None:
        drain(runtime, commands.post_message(cid, "go", SCOPE)[1])
        info = store.conversations.load(cid)
        assert info.fsm.state == "idle"
        assert (info.fsm.agent is not None) == ("handoffs" in settings)

    def one() -> Callable[[], None]:
        cid = commands.create_conversation(SCOPE, settings).id
        if second:
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
            name: per_turn(_turn(store, runtime, commands, settings, second=second), turns,
                           engine=store.engine)
            for name, settings, second in (
                ("plain", plain, False), ("local", LOCAL, False), ("handoff", HANDOFF, False),
                ("next", plain, True), ("held", HANDOFF, True))}
        store.dispose()
    rows = (("one round", measured["plain"]), ("local @tool", measured["local"]),
            ("handoff", measured["handoff"]),
            ("handoff - 1 rnd", less(measured["handoff"], measured["plain"])),
            ("handoff - @tool", less(measured["handoff"], measured["local"])),
            ("next turn", measured["next"]), ("held next turn", measured["held"]),
            ("held adds", less(measured["held"], measured["next"])))
    print_rows(rows, width=15)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
