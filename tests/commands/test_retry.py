"""retry on a real store: a failed conversation goes on once the provider recovers."""
from __future__ import annotations

import dataclasses

import pytest

from agentq.core.scope import Scope
from agentq.errors import Conflict, NotFound
from tests.support.drive import drain
from tests.support.turns import SCOPE, start


class RecoveredProviders:
    """The same script with every injected failure gone: the outage is over."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def __call__(self, settings):
        inner = self.inner(settings)

        class Recovered:
            def stream(self, request, ctx, cancel):
                script = [r.model_copy(update={"fail": None}) for r in ctx.settings.script]
                healthy = ctx.settings.model_copy(update={"script": script})
                return inner.stream(request, dataclasses.replace(ctx, settings=healthy), cancel)

        return Recovered()


def test_a_failed_conversation_can_be_retried_once_the_provider_recovers(
    store, runtime, commands
):
    cid, _ = start(commands, runtime, [{"text": "back", "fail": {"status": 401, "times": 1}}])
    assert store.conversations.load(cid).fsm.state == "failed"
    with pytest.raises(NotFound):
        commands.retry(cid, Scope(tenant="someone-else", user="u1"))
    runtime.rules.providers = RecoveredProviders(runtime.rules.providers)
    drain(runtime, commands.retry(cid, SCOPE))
    events = store.log.list_events(cid)
    assert [e.type for e in events] == ["user_msg", "error", "error", "assistant_msg"]
    assert events[2].content["status"] == "retried" and events[3].content["text"] == "back"
    assert store.conversations.load(cid).fsm.state == "idle"
    with pytest.raises(Conflict, match="idle"):
        commands.retry(cid, SCOPE)
