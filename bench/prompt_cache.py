"""What share of a conversation's input tokens the model reads from its prompt cache.

A 20-turn conversation (each turn: a tool round, then an answer) runs through the
runtime against the strict emulator of each API, which models prompt caching as the API
documents it (Anthropic: the breakpoints agentq places; OpenAI: automatic prefixes).
Prints, per API, the input tokens sent, the share read from cache, and what was written.

    python bench/prompt_cache.py [--turns 20]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentq.commands import Commands  # noqa: E402
from agentq.config import Config  # noqa: E402
from agentq.live.pubsub import PubSub  # noqa: E402
from agentq.runtime import Runtime  # noqa: E402
from agentq.store import Store  # noqa: E402
from agentq.tools import Registry  # noqa: E402
from agentq.core.scope import Scope  # noqa: E402
from tests.support.drive import drain  # noqa: E402
from tests.support.emulators import Call, Reply  # noqa: E402
from tests.support.emulators.kit import Kit, running  # noqa: E402
from tests.support.rules import Rules  # noqa: E402

SYSTEM = "You are a careful assistant for weather questions. " * 20


def cache_usage(kit: Kit, store: Store, turns: int = 20) -> dict[str, int]:
    """Input tokens of every model call of a `turns`-turn conversation, by kind."""
    registry = Registry.from_modules(["agentq.tools.demo"])
    runtime = Runtime(store=store, registry=registry, pubsub=PubSub("embedded://prompt-cache"),
                      config=Config(), rules=Rules(providers=kit.access().provider_for),
                      sleep=lambda s: None)
    commands = Commands(store, registry, policy=kit.policy())
    scope = Scope(tenant="t1", user="u1")
    settings = kit.settings(tools=["get_weather"], system=SYSTEM)
    conversation = commands.create_conversation(scope, settings)
    for turn in range(turns):
        kit.emulator.then(Reply(text="", calls=(Call("get_weather", {"city": f"City {turn}"}),)),
                          Reply(text=f"In City {turn} it is mild, about {turn} degrees."))
        _, follow = commands.post_message(conversation.id, f"Weather in City {turn}?", scope)
        drain(runtime, follow)
    totals = {"input_tokens": 0, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
    for event in store.log.list_events(conversation.id, limit=10_000):
        if event.type == "assistant_msg":
            for name in totals:
                totals[name] += event.content.get("usage", {}).get(name, 0)
    return totals


def read_share(totals: dict[str, int], kind: str) -> float:
    """Share of all input tokens read from cache (OpenAI counts cached tokens inside its input)."""
    read = totals["cache_read_input_tokens"]
    sent = totals["input_tokens"] if kind == "openai" else (
        totals["input_tokens"] + read + totals["cache_creation_input_tokens"])
    return read / sent if sent else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    for kind in ("anthropic", "openai"):
        with running(kind) as emulator, tempfile.TemporaryDirectory() as folder:
            store = Store.open(f"sqlite:///{folder}/bench.db")
            store.migrate()
            totals = cache_usage(Kit(kind, emulator), store, args.turns)
            store.dispose()
        print(f"{kind:9}  {args.turns} turns  input {sum(totals.values()) if kind != 'openai' else totals['input_tokens']:>7} tokens  "
              f"read from cache {read_share(totals, kind):6.1%}  written {totals['cache_creation_input_tokens']}")


if __name__ == "__main__":
    main()
