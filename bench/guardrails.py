"""What guardrails cost over a plain turn, as the runtime runs them: functions and agents.

One turn is one model round (the scripted provider, no delay) that answers at once, on
Postgres, its steps run in this process (no broker: `tests.support.drive.drain`), so the
figures are the runtime's and the database's work alone. The guarded turn runs the same
round with one input guardrail and one output guardrail, both sync functions that pass
(`passes`, below): each runs on a guardrail thread and adds a verdict event to the step's
one commit. The parallel row runs the input guardrail beside the model call instead. The
agent rows run one input guardrail that is an agent (`judge`, the tenant's, whose scripted
model answers a passing verdict at once: no model latency, so what is measured is the
runtime's and the database's work for one more model call and its usage rows), before the
model call and beside it, against one function input guardrail. The kinds of turn are
measured in ten interleaved blocks, so a change of the machine's load weighs on all. Each
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
from agentq.core.agents import AgentDefinition  # noqa: E402
from agentq.core.scope import Scope  # noqa: E402
from agentq.core.settings import Settings  # noqa: E402
from agentq.runtime import Runtime  # noqa: E402
from agentq.store import Store  # noqa: E402
from agentq.tools import Registry  # noqa: E402
from bench.cpu import interleaved, less, print_rows  # noqa: E402
from bench.places import postgres_database  # noqa: E402
from tests.support.drive import Recorder, drain  # noqa: E402

SCOPE = Scope(tenant="bench", user="bench")
PLAIN = {"script": [{"text": "ok"}]}
GUARDED = {**PLAIN, "input_guardrails": ["passes"], "output_guardrails": ["passes"]}
PARALLEL = {**PLAIN, "input_guardrails": [{"name": "passes", "parallel": True}],
            "output_guardrails": ["passes"]}
FUNCTION_IN = {**PLAIN, "input_guardrails": ["passes"]}
AGENT_IN = {**PLAIN, "input_guardrails": ["agent:judge"]}
AGENT_BESIDE = {**PLAIN, "input_guardrails": [{"agent": "judge", "parallel": True}]}
JUDGE = Settings(system="Trip on card numbers.", script_repeat=True,
                 script=[{"text": '{"tripped": false, "reason": "no card number"}'}])


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
        store.agents.create(SCOPE.tenant, AgentDefinition(name="judge", settings=JUDGE),
                            now=commands.clock())
        kinds = {"plain": (PLAIN, 0), "guarded": (GUARDED, 2), "parallel": (PARALLEL, 2),
                 "function": (FUNCTION_IN, 1), "agent": (AGENT_IN, 1), "beside": (AGENT_BESIDE, 1)}
        m = interleaved({name: _turn(store, runtime, commands, settings, verdicts)
                         for name, (settings, verdicts) in kinds.items()}, turns,
                        engine=store.engine)
        store.dispose()
    plain = m["plain"]
    rows = (("plain turn", plain), ("in + out", m["guarded"]), ("parallel in + out", m["parallel"]),
            ("in + out add", less(m["guarded"], plain)),
            ("parallel adds", less(m["parallel"], plain)),
            ("function in", m["function"]), ("agent in", m["agent"]),
            ("agent in beside", m["beside"]),
            ("function in adds", less(m["function"], plain)),
            ("agent in adds", less(m["agent"], plain)),
            ("agent - function", less(m["agent"], m["function"])),
            ("beside adds", less(m["beside"], plain)))
    print_rows(rows)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
