"""cancel on a real store: the turn ends and the queued message runs next."""
from __future__ import annotations

import pytest

from agentq.errors import Conflict
from tests.support.drive import drain
from tests.support.turns import APPROVAL, SCOPE, start


def test_cancel_ends_the_turn_and_the_queued_message_runs_next(store, runtime, commands):
    cid, _ = start(commands, runtime, APPROVAL)
    queued, _ = commands.post_message(cid, "after that", SCOPE)
    assert queued.queued
    drain(runtime, commands.cancel(cid, SCOPE))
    texts = [(e.type, e.content.get("text")) for e in store.log.list_events(cid) if e.type != "tool_result"]
    assert texts[-2:] == [("user_msg", "after that"), ("assistant_msg", "echo: after that")]
    with pytest.raises(Conflict, match="idle"):
        commands.cancel(cid, SCOPE)
