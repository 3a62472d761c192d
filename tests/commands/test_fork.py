"""fork on a real store: a copy at a turn boundary goes on by itself; elsewhere it is refused."""
from __future__ import annotations

import pytest

from agentq.core.scope import Scope
from agentq.errors import Conflict, InvalidInput, NotFound
from tests.support.drive import drain
from tests.support.turns import SCOPE, WEATHER, start


def test_a_fork_at_a_turn_boundary_copies_the_log_and_goes_on_by_itself(store, runtime, commands):
    cid, _ = start(commands, runtime, WEATHER)
    _, follow = commands.post_message(cid, "and tomorrow?", SCOPE)
    drain(runtime, follow)
    fork = commands.fork(cid, SCOPE, at_seq=5)
    copied, source = store.log.list_events(fork.id), store.log.list_events(cid)
    assert [(e.seq, e.type, e.content, e.round_id) for e in copied] == [
        (e.seq, e.type, e.content, e.round_id) for e in source[:5]
    ]
    assert {e.id for e in copied}.isdisjoint(e.id for e in source)
    assert store.conversations.load(fork.id).fsm.state == "idle"
    assert [c.status for c in store.calls.list_of(fork.id)] == ["done"]
    _, follow = commands.post_message(fork.id, "other question", SCOPE)
    drain(runtime, follow)
    assert store.log.list_events(fork.id)[-1].content["text"] == "echo: other question"
    assert len(store.log.list_events(cid)) == 7  # the source is untouched


def test_a_fork_inside_a_turn_or_past_the_end_is_refused(store, runtime, commands):
    cid, _ = start(commands, runtime, WEATHER)
    for seq in (2, 3, 4, 6):
        with pytest.raises(Conflict):
            commands.fork(cid, SCOPE, at_seq=seq)
    with pytest.raises(InvalidInput):
        commands.fork(cid, SCOPE, at_seq=-1)
    with pytest.raises(NotFound):
        commands.fork(cid, Scope(tenant="other", user=None), at_seq=5)
    assert store.conversations.list_ids() == [cid]
