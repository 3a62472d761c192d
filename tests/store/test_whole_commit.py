"""A step's whole commit (`Writes.commit_step`): one statement on PostgreSQL, all or nothing,
and the transactional way where one statement does not do, on SQLite and PostgreSQL."""
from __future__ import annotations

import pytest

from agentq.core.events import EventDraft, FsmState
from agentq.core.usage import Tokens
from agentq.errors import LogMoved, Stale
from agentq.store import Store
from agentq.store.webhooks import WebhookEndpoint
from agentq.store.whole_commit import ClosingCall, Scheduling, SeeingInbox
from tests.store.test_store import at, call, message, new_conversation, user
from tests.store.test_store_statements import (
    assert_counted_once,
    counted,
    model_usage,
    running_step,
    tool_step,
)

DONE = {"status": "ok", "output": 7}
ONE_STATEMENT = {"postgresql": 1}


def answer(text: str) -> EventDraft:
    return EventDraft(type="assistant_msg", content={"text": text}, turn_id="t1",
                      round_id="r1", created_at=at(2))


def commit(store: Store, cid: str, drafts: list[EventDraft], *, key: str, worker: str,
           finish, state: FsmState | None = None, next_seq: int = 1):
    """The step's commit, where a new conversation's log ends unless `next_seq` says."""
    return store.writes.commit_step(cid, drafts, next_seq=next_seq,
                                    state_after=lambda _: state or FsmState(state="running"),
                                    step_key=key, worker=worker, finish=finish, now=at(2))


def nothing_written(store: Store, cid: str, before) -> bool:
    return store.conversations.load(cid) == before and store.log.list_events(cid) == []


def test_a_tool_steps_commit_is_one_statement_on_postgres(store):
    cid = new_conversation(store).id
    with store.writes.locked(cid) as tx:
        tx.put_tool_calls([call(cid, "c1", status="scheduled")])
    running_step(store, cid, "tool-1", worker="w1")
    with counted(store) as sent:
        done = commit(store, cid, [user("result")], key="tool-1", worker="w1",
                      finish=ClosingCall("c1", DONE))
    assert len(sent) == ONE_STATEMENT.get(store.engine.dialect.name, len(sent))
    assert store.log.list_events(cid) == done.events and [e.seq for e in done.events] == [1]
    assert done.conversation == store.conversations.load(cid) and done.conversation.next_seq == 2
    assert store.steps.load("tool-1").status == "succeeded"
    found = store.calls.load(cid, "c1")
    assert (found.status, found.result) == ("done", DONE)


def test_a_model_steps_commit_schedules_its_calls_and_counts_its_tokens_in_one_statement(store):
    cid = new_conversation(store).id
    running_step(store, cid, "llm-1", worker="w1")
    calls = [call(cid, "c1", status="scheduled"), call(cid, "c2")]
    tokens = Tokens(input_tokens=30, output_tokens=12, calls=1)
    with counted(store) as sent:
        commit(store, cid, [answer("asks"), answer("more")], key="llm-1", worker="w1",
               finish=Scheduling(calls, [tool_step(cid, "c1")],
                                 model_usage(cid, tokens, now=at(2))))
    assert len(sent) == ONE_STATEMENT.get(store.engine.dialect.name, len(sent))
    assert store.calls.list_of(cid) == calls
    assert store.steps.load("llm-1").status == "succeeded"
    assert store.steps.load("tool-c1").status == "scheduled"
    assert [e.seq for e in store.log.list_events(cid)] == [1, 2]
    assert_counted_once(store, cid, tokens)


def test_the_commit_of_a_step_taken_over_writes_nothing(store):
    cid = new_conversation(store).id
    running_step(store, cid, "llm-1", worker="w-new")
    before = store.conversations.load(cid)
    with pytest.raises(Stale, match="no longer ours"):
        commit(store, cid, [answer("late")], key="llm-1", worker="w-old",
               finish=Scheduling([call(cid, "c1", status="scheduled")], [tool_step(cid, "c1")],
                                 model_usage(cid, Tokens(input_tokens=5, calls=1), now=at(2))))
    assert nothing_written(store, cid, before)
    assert store.calls.list_of(cid) == [] and store.steps.load("tool-c1") is None
    assert store.steps.load("llm-1").status == "running"
    assert store.usage.load_spent(cid).totals == {}
    assert store.usage.report(tenant="acme", start=at(0), end=at(3600), group_by="hour",
                              by=(), limit=10) == []


def test_the_commit_of_a_step_whose_log_moved_writes_nothing(store):
    cid = new_conversation(store).id
    with store.writes.locked(cid) as tx:
        tx.put_tool_calls([call(cid, "c1", status="scheduled")])
    running_step(store, cid, "tool-1", worker="w1")
    with store.writes.locked(cid) as tx:
        tx.append([user("meanwhile")])
    before = store.conversations.load(cid)
    with pytest.raises(LogMoved):
        commit(store, cid, [user("result")], key="tool-1", worker="w1",
               finish=ClosingCall("c1", DONE), next_seq=1)
    assert store.conversations.load(cid) == before and len(store.log.list_events(cid)) == 1
    assert store.steps.load("tool-1").status == "running"
    assert store.calls.load(cid, "c1").status == "scheduled"


def test_the_commit_of_a_tool_step_whose_call_was_closed_meanwhile_writes_nothing(store):
    cid = new_conversation(store).id
    with store.writes.locked(cid) as tx:
        tx.put_tool_calls([call(cid, "c1", status="done")])
    running_step(store, cid, "tool-1", worker="w1")
    before = store.conversations.load(cid)
    with pytest.raises(Stale, match="closed meanwhile"):
        commit(store, cid, [user("result")], key="tool-1", worker="w1",
               finish=ClosingCall("c1", DONE))
    assert nothing_written(store, cid, before)
    assert store.steps.load("tool-1").status == "running"
    assert store.calls.load(cid, "c1").result is None


def test_a_turns_last_commit_says_whether_a_message_waits(store):
    cid = new_conversation(store).id
    running_step(store, cid, "llm-1", worker="w1")
    running_step(store, cid, "llm-2", worker="w1")
    idle = FsmState(state="idle")
    assert not commit(store, cid, [answer("one")], key="llm-1", worker="w1",
                      finish=SeeingInbox(), state=idle).message_waits()
    with store.writes.locked(cid) as tx:
        tx.add_inbox(message(cid, "m1"), queued=True, turn_id=None, taken_at=None)
    assert commit(store, cid, [answer("two")], key="llm-2", worker="w1",
                  finish=SeeingInbox(), state=idle, next_seq=2).message_waits()


def test_a_commit_that_ends_a_turn_tells_the_tenants_webhook_endpoint(store):
    """The outbox row commits with the events: the transactional way writes it."""
    cid = new_conversation(store).id
    now = at(0)
    store.webhooks.add_endpoint(WebhookEndpoint(
        id="we_1", tenant="acme", url="https://hooks.example.com/x",
        event_types=["turn.completed"], sealed_secret="sealed", previous_sealed=None,
        previous_until=None, enabled=True, disabled_reason=None, failing_since=None,
        created_at=now, updated_at=now), max_per_tenant=10)
    other = new_conversation(store, tenant="globex").id
    running_step(store, cid, "llm-1", worker="w1")
    running_step(store, other, "llm-2", worker="w1")
    idle = FsmState(state="idle")
    with counted(store) as sent:
        committed = commit(store, other, [answer("done")], key="llm-2", worker="w1",
                           finish=SeeingInbox(), state=idle)
        if store.engine.dialect.name == "postgresql":
            assert len(sent) == 1  # the statement: the inbox is read when asked
        assert not committed.message_waits()
    if store.engine.dialect.name == "postgresql":
        assert len(sent) == 2  # the statement, and the read of the inbox after it
    done = commit(store, cid, [answer("done")], key="llm-1", worker="w1", finish=SeeingInbox(),
                  state=idle)
    [delivery] = store.webhooks.list_deliveries("we_1", limit=10)
    assert (delivery.conversation_id, delivery.seq, delivery.event_type) == (
        cid, done.events[0].seq, "turn.completed")
    assert store.steps.load("llm-1").status == "succeeded"


@pytest.mark.postgres
def test_a_steps_commit_statement_is_converted_for_the_driver_once_not_on_every_run(
    pg_store_clean, monkeypatch
):
    """psycopg converts a statement's placeholders anew on every run past 4 KB or 50
    parameters unless told otherwise; a step's commit is past both."""
    from psycopg import _queries

    store = pg_store_clean
    uncached: list[int] = []
    convert = _queries._query2pg_nocache

    def counted_conversion(query, encoding):
        uncached.append(len(query))
        return convert(query, encoding)

    monkeypatch.setattr(_queries, "_query2pg_nocache", counted_conversion)
    for n in range(3):
        cid = new_conversation(store).id
        running_step(store, cid, f"llm-{n}", worker="w1")
        commit(store, cid, [answer("done")], key=f"llm-{n}", worker="w1",
               finish=SeeingInbox(model_usage(cid, Tokens(input_tokens=3, output_tokens=2,
                                                           calls=1), now=at(2))))
    assert uncached == []
