"""resolve on a real store: the same answer twice changes nothing, a different one conflicts."""
from __future__ import annotations

import pytest

from agentq.errors import Conflict, NotFound
from tests.support.turns import APPROVAL, SCOPE, start


def test_the_same_resolution_twice_changes_nothing_and_a_different_one_conflicts(
    store, runtime, commands
):
    cid, _ = start(commands, runtime, APPROVAL)
    (call_id,) = store.conversations.load(cid).fsm.pending
    commands.resolve(cid, call_id, SCOPE, status="resolved", result={"ok": True})
    log = store.log.list_events(cid)
    again, follow = commands.resolve(cid, call_id, SCOPE, status="resolved", result={"ok": True})
    assert again.status == "resolved" and follow == []
    with pytest.raises(Conflict) as late:
        commands.resolve(cid, call_id, SCOPE, status="errored", result="no")
    assert late.value.details == {"status": "resolved"}  # read under the lock that refused it
    with pytest.raises(NotFound):
        commands.resolve(cid, "call_unknown", SCOPE, status="resolved", result=None)
    assert store.log.list_events(cid) == log
