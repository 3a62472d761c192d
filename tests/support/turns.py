"""Turns on a real store, driven in-process: the runtime and commands tests share the scope,
the scripts, the counting providers and the way a conversation is started and read."""
from __future__ import annotations

from agentq.core.scope import Scope
from agentq.tenancy.access import provider_for
from tests.support.drive import drain

SCOPE = Scope(tenant="t1", user="u1")

WEATHER = [
    {"text": "Checking.", "tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}]},
    {"text": "Cold in Oslo.", "chunks": 3},
]

APPROVAL = [
    {"text": "Need approval.", "tool_calls": [{"name": "approve", "args": {"amount": 5}}]},
    {"text": "Done."},
]


class CountingProviders:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, settings):
        inner = provider_for(settings)
        outer = self

        class Counting:
            def stream(self, request, ctx, cancel):
                outer.calls += 1
                return inner.stream(request, ctx, cancel)

        return Counting()


def start(commands, runtime, script, text="hello", **settings):
    conv = commands.create_conversation(SCOPE, {"script": script, **settings})
    _, follow = commands.post_message(conv.id, text, SCOPE)
    return conv.id, drain(runtime, follow)


def types(store, cid):
    return [e.type for e in store.log.list_events(cid)]
