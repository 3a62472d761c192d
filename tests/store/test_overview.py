"""Overviews.load, on SQLite and PostgreSQL: what GET /v1/conversations/{id} shows, read
in one statement."""
from __future__ import annotations

from agentq.core.events import FsmState
from tests.store.test_store import _view_fixture, call, new_conversation

AWAITING = FsmState(state="awaiting_input", turn_id="t1", running=("queued",),
                    pending={"open": {"executor": "human", "name": "approve", "expires_at": None}})


def test_the_overview_has_pending_calls_oldest_first_the_inbox_count_and_summary(store):
    cid = _view_fixture(store, AWAITING)  # "open" pending at 2 s, "queued" and "done" not pending
    with store.writes.locked(cid) as tx:
        tx.put_tool_calls([call(cid, "later", seconds=5), call(cid, "early", seconds=1)])
    found = store.overview.load(cid, tenant="acme")
    assert found.conversation.id == cid and found.conversation.fsm.state == "awaiting_input"
    assert [c.id for c in found.pending] == ["early", "open", "later"]
    assert found.pending[0].args == {"amount": 3} and found.pending[0].status == "pending"
    assert found.inbox == 2 and found.summary == (1, 4)


def test_the_overview_of_a_new_conversation_has_no_calls_no_inbox_and_no_summary(store):
    cid = new_conversation(store).id
    found = store.overview.load(cid)
    assert (found.pending, found.inbox, found.summary) == ([], 0, None)


def test_another_tenants_or_an_unknown_conversation_has_no_overview(store):
    cid = new_conversation(store, tenant="acme").id
    assert store.overview.load(cid, tenant="globex") is None
    assert store.overview.load("no-such-conversation") is None
