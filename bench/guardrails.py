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

import sys
from collections.abc import Callable
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
from bench.cpu import less, per_turn, print_rows  # noqa: E402
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


def _turn(store: Store, runtime: Runtime, commands: Commands, settings: dict, verdicts: int
          ) -> Callable[[], Callable[[], None]]:
    def one() -> Callable[[], None]:
        cid = commands.create_conversation(SCOPE, settings).id

        def run() -> None:
            drain(runtime, commands.post_message(cid, "go", SCOPE)[1])
            events = store.log.list_events(cid)
            assert [e.type for e in events].count("guardrail") == verdicts
            assert events[-1].type == "assistant_msg"
        return run
    return one


def main(turns: int = 200) -> None:
    with postgres_database() as url:
        store = Store.open(url)
        store.migrate()
        registry = Registry.from_modules(["agentq.tools.demo", "bench.guardrails"])
        runtime = Runtime(store=store, registry=registry, pubsub=Recorder(), config=Config(),
                          sleep=lambda s: None)
        commands = Commands(store, registry)
        plain = per_turn(_turn(store, runtime, commands, PLAIN, 0), turns, engine=store.engine)
        guarded = per_turn(_turn(store, runtime, commands, GUARDED, 2), turns,
                           engine=store.engine)
        parallel = per_turn(_turn(store, runtime, commands, PARALLEL, 2), turns,
                            engine=store.engine)
        store.dispose()
    rows = (("plain turn", plain), ("in + out", guarded), ("parallel in + out", parallel),
            ("in + out add", less(guarded, plain)), ("parallel adds", less(parallel, plain)))
    print_rows(rows)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
