"""The store's behaviour, on SQLite and PostgreSQL through the parametrized `store` fixture."""
from __future__ import annotations

import dataclasses
import json
import multiprocessing
import threading
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentq.core.events import EventDraft, FsmState, InboxItem, ToolCallRecord
from agentq.core.settings import Settings
from agentq.core.timefmt import format_ts
from agentq.errors import Conflict, NotFound, Stale
from agentq.store import ConversationInfo, NewStep, Store
from agentq.store.engine import create_engine
from agentq.store.ledger import ALONE_AFTER_DEATHS, runs_alone
from agentq.store.schema import events, metadata
from tests.support.clock import T0
from tests.support.store import claim, load_step_in, save_summary, schedule_step, set_fsm


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def new_conversation(store: Store, *, tenant: str = "acme", seconds: float = 0) -> ConversationInfo:
    return store.conversations.create(tenant=tenant, settings=Settings(), now=at(seconds))


def user(text: str, seconds: float = 0) -> EventDraft:
    return EventDraft(type="user_msg", content={"text": text}, created_at=at(seconds))


def append(store: Store, cid: str, *drafts: EventDraft) -> list:
    with store.writes.locked(cid) as tx:
        return tx.append(drafts)


def call(cid: str, call_id: str, *, status: str = "pending", expires_at: datetime | None = None,
         seconds: float = 0) -> ToolCallRecord:
    return ToolCallRecord(
        conversation_id=cid, id=call_id, name="approve", executor="human", status=status,
        args={"amount": 3}, round_id="r1", turn_id="t1", created_at=at(seconds),
        expires_at=expires_at,
    )


def message(cid: str, item_id: str, *, key: str | None = None, seconds: float = 0) -> InboxItem:
    return InboxItem(
        id=item_id, conversation_id=cid, content={"text": item_id}, on_busy="enqueue",
        created_at=at(seconds), idempotency_key=key, scope={"user": "u1"},
    )


def schedule(store: Store, cid: str, key: str, *, seconds: float = 0) -> bool:
    return schedule_step(
        store, step_key=key, conversation_id=cid, kind="llm", ref={"after_seq": 1}, round_id="r1",
        celery_task_id="task-" + key, now=at(seconds),
    )


def schedule_and_claim(store: Store, cid: str, key: str, worker: str, *, seconds: float,
                       max_attempts: int = 5):
    step = NewStep(key, cid, "llm", {"after_seq": 1}, "r1", f"task-{key}-{worker}", "acme")
    return store.steps.schedule_and_claim(step, worker=worker, lease_s=30, now=at(seconds),
                                          max_attempts=max_attempts)


# the log


def test_appended_events_get_gap_free_seq_starting_at_one(store):
    cid = new_conversation(store).id
    first = append(store, cid, user("a"), user("b"))
    second = append(store, cid, user("c"))
    assert [event.seq for event in first + second] == [1, 2, 3]
    assert store.conversations.load(cid).next_seq == 4


def test_appending_nothing_returns_nothing_and_moves_nothing(store):
    cid = new_conversation(store).id
    assert append(store, cid) == []
    assert store.conversations.load(cid).next_seq == 1


def test_events_round_trip_exactly(store):
    cid = new_conversation(store).id
    content = {
        "text": "héllo ✓ 日本語 🙂",
        "nested": {"list": [1, 2.5, -0.125, None, True, {"deep": ["x"]}], "empty": {}},
        "float": 0.1,
        "small": 1.5e-7,
    }
    draft = EventDraft(type="tool_call", content=content, created_at=at(1.5), turn_id="t1",
                       round_id="r1", step_key="k" * 64)
    [written] = append(store, cid, draft)
    [loaded] = store.log.list_events(cid)
    assert loaded == written
    assert loaded.content == content


def test_created_at_survives_store_and_load_unchanged(store):
    # docs/design.md §16.1, "timestamp drift": created_at came back shifted and reformatted.
    cid = new_conversation(store).id
    created_at = datetime(2026, 3, 1, 7, 5, 9, 900001, tzinfo=timezone(timedelta(hours=-5)))
    append(store, cid, EventDraft(type="user_msg", content={}, created_at=created_at))
    [loaded] = store.log.list_events(cid)
    assert loaded.created_at == created_at
    assert format_ts(loaded.created_at) == format_ts(created_at) == "2026-03-01T12:05:09.900001Z"
    assert store.conversations.load(cid).created_at == T0


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(moment=st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 1, 1),
                           timezones=st.just(timezone.utc)))
def test_any_created_at_survives_store_and_load_unchanged(store, moment):
    cid = new_conversation(store).id
    append(store, cid, EventDraft(type="user_msg", content={}, created_at=moment))
    [loaded] = store.log.list_events(cid)
    assert loaded.created_at == moment
    assert format_ts(loaded.created_at) == format_ts(moment)


def test_list_events_pages_by_after_seq_and_limit(store):
    cid = new_conversation(store).id
    append(store, cid, *(user(str(n)) for n in range(5)))
    assert [e.seq for e in store.log.list_events(cid, after_seq=2, limit=2)] == [3, 4]
    assert [e.seq for e in store.log.list_events(cid, after_seq=5)] == []


def _append_from_thread(store: Store, cid: str, count: int) -> None:
    for n in range(count):
        append(store, cid, user(str(n)))


def test_concurrent_threads_append_without_gaps_or_losses(store):
    cid = new_conversation(store).id
    threads = [threading.Thread(target=_append_from_thread, args=(store, cid, 25)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [event.seq for event in store.log.list_events(cid)] == list(range(1, 201))


def _append_from_process(url: str, cid: str, count: int) -> None:
    own = Store.open(url)
    try:
        _append_from_thread(own, cid, count)
    finally:
        own.dispose()


def test_concurrent_processes_append_without_gaps_or_losses(store, db_url):
    cid = new_conversation(store).id
    spawn = multiprocessing.get_context("spawn")
    processes = [spawn.Process(target=_append_from_process, args=(db_url, cid, 20)) for _ in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=60)
    assert [process.exitcode for process in processes] == [0, 0, 0, 0]
    assert [event.seq for event in store.log.list_events(cid)] == list(range(1, 81))


# the locked transaction


def test_a_rolled_back_locked_block_writes_nothing(store):
    cid = new_conversation(store).id
    with pytest.raises(RuntimeError), store.writes.locked(cid) as tx:
        tx.append([user("lost")])
        tx.put_tool_calls([call(cid, "c1")])
        set_fsm(tx, FsmState(state="running"), now=at(1))
        raise RuntimeError("crash before commit")
    assert store.log.list_events(cid) == []
    assert store.calls.list_of(cid) == []
    info = store.conversations.load(cid)
    assert (info.next_seq, info.fsm, info.updated_at) == (1, FsmState(), T0)


def test_an_append_from_a_row_that_moved_is_a_loud_conflict_not_a_gap(store):
    """inv. 8: if the row under the lock is not the row read, nothing is written."""
    cid = new_conversation(store).id
    append(store, cid, user("a"))
    with pytest.raises(Conflict, match="changed under its lock"), store.writes.locked(cid) as tx:
        tx.conversation = dataclasses.replace(tx.conversation, next_seq=5)  # as if read elsewhere
        tx.append([user("b")])
    assert [event.seq for event in store.log.list_events(cid)] == [1]
    assert store.conversations.load(cid).next_seq == 2


def test_appending_where_the_log_ends_appends_and_writes_the_rest_under_the_lock(store):
    cid = new_conversation(store).id
    append(store, cid, user("a"))
    running = FsmState(state="running", turn_id="t1")
    with store.writes.appending(cid, [user("b", 1), user("c", 1)], next_seq=2,
                                state_after=lambda appended: running, now=at(2)) as (tx, events):
        assert [event.seq for event in events] == [2, 3]
        assert tx.conversation.next_seq == 4 and tx.conversation.fsm == running
        tx.put_tool_calls([call(cid, "c1")])
    assert [event.content["text"] for event in store.log.list_events(cid)] == ["a", "b", "c"]
    assert [c.id for c in store.calls.list_of(cid)] == ["c1"]
    info = store.conversations.load(cid)
    assert (info.next_seq, info.fsm, info.updated_at) == (4, running, at(2))


def test_appending_after_the_log_moved_raises_stale_and_writes_nothing(store):
    cid = new_conversation(store).id
    append(store, cid, user("a"), user("b"))
    ran = []
    with pytest.raises(Stale), store.writes.appending(
        cid, [user("late")], next_seq=2, state_after=lambda appended: FsmState(state="running"),
        now=at(5),
    ):
        ran.append("block")
    assert ran == []
    assert [event.content["text"] for event in store.log.list_events(cid)] == ["a", "b"]
    info = store.conversations.load(cid)
    assert (info.next_seq, info.fsm) == (3, FsmState())


def test_a_rolled_back_appending_block_writes_nothing(store):
    cid = new_conversation(store).id
    with pytest.raises(RuntimeError), store.writes.appending(
        cid, [user("lost")], next_seq=1, state_after=lambda appended: FsmState(state="running"),
        now=at(1),
    ) as (tx, _):
        tx.put_tool_calls([call(cid, "c1")])
        raise RuntimeError("crash before commit")
    assert store.log.list_events(cid) == [] and store.calls.list_of(cid) == []
    assert store.conversations.load(cid).next_seq == 1


def test_appending_waits_for_the_lock_holder_then_finds_the_log_moved(store):
    """Two writers at the same seq: one wins, the other waits for it and appends nothing."""
    cid = new_conversation(store).id
    holding, outcome = threading.Event(), []

    def other_writer() -> None:
        holding.wait(5)
        try:
            with store.writes.appending(cid, [user("second")], next_seq=1,
                                        state_after=lambda appended: FsmState(), now=at(2)):
                outcome.append("appended")
        except Stale:
            outcome.append("stale")

    thread = threading.Thread(target=other_writer)
    thread.start()
    with store.writes.locked(cid) as tx:
        holding.set()
        thread.join(0.3)
        assert thread.is_alive(), "the second writer must wait for the lock"
        tx.append([user("first")])
    thread.join(10)
    assert outcome == ["stale"]
    assert [event.content["text"] for event in store.log.list_events(cid)] == ["first"]


def test_locked_raises_not_found_for_an_unknown_conversation(store):
    with pytest.raises(NotFound), store.writes.locked("missing"):
        pass


def test_set_fsm_and_set_status_are_stored(store):
    cid = new_conversation(store).id
    fsm = FsmState(state="awaiting_input", pending={"c1": {"executor": "human"}}, last_seq=2)
    with store.writes.locked(cid) as tx:
        set_fsm(tx, fsm, now=at(5))
        tx.set_status("ended", now=at(6))
    info = store.conversations.load(cid)
    assert (info.fsm, info.status, info.updated_at) == (fsm, "ended", at(6))


# conversations


def test_load_conversation_for_another_tenant_returns_none(store):
    cid = new_conversation(store, tenant="acme").id
    assert store.conversations.load(cid, tenant="acme").id == cid
    assert store.conversations.load(cid, tenant="other") is None
    assert store.conversations.load("missing") is None


def test_list_conversations_filters_and_pages_by_created_at_then_id(store):
    ids = [new_conversation(store, tenant="acme", seconds=n // 2).id for n in range(5)]
    new_conversation(store, tenant="other")
    with store.writes.locked(ids[0]) as tx:
        set_fsm(tx, FsmState(state="running"), now=at(9))
    with store.writes.locked(ids[1]) as tx:
        tx.set_status("ended", now=at(9))
    expected = sorted(ids, key=lambda cid: (store.conversations.load(cid).created_at, cid))
    first = store.conversations.list_page(tenant="acme", limit=3)
    rest = store.conversations.list_page(tenant="acme", after_id=first[-1].id)
    assert [info.id for info in first + rest] == expected
    assert [info.id for info in store.conversations.list_page(state="running")] == [ids[0]]
    assert ids[1] not in [info.id for info in store.conversations.list_page(status="active")]
    assert ids[1] not in store.conversations.list_ids()
    assert len(store.conversations.list_ids(status=None)) == 6


def test_conversation_to_json_has_the_api_shape(store):
    info = new_conversation(store)
    append(store, info.id, user("a"))
    data = store.conversations.load(info.id).to_json()
    assert data["last_seq"] == 1
    assert data["settings"] == Settings().model_dump(mode="json")
    assert data["fsm_state"] == FsmState().to_json()
    assert data["created_at"] == "2026-11-21T22:14:03.123456Z"
    assert data["agent"] is None and data["parent"] is None
    assert set(data) == {"id", "tenant", "status", "agent", "parent", "settings", "fsm_state",
                         "last_seq", "created_at", "updated_at"}


# the view


def _view_fixture(store: Store, fsm: FsmState) -> str:
    """Six user messages, two summaries, three calls (two open), three inbox rows (two waiting)."""
    cid = new_conversation(store).id
    append(store, cid, *(user(str(n)) for n in range(6)))
    save_summary(store, conversation_id=cid, from_seq=1, to_seq=2, content={"s": 1}, version=1, now=at(1))
    save_summary(store, conversation_id=cid, from_seq=1, to_seq=4, content={"s": 2}, version=1, now=at(2))
    with store.writes.locked(cid) as tx:
        tx.put_tool_calls([call(cid, "open", seconds=2), call(cid, "queued", status="scheduled", seconds=1),
                           call(cid, "done", status="resolved")])
        tx.add_inbox(message(cid, "m2", seconds=2), queued=True, turn_id=None, taken_at=None)
        tx.add_inbox(message(cid, "m1", seconds=1), queued=True, turn_id=None, taken_at=None)
        tx.add_inbox(message(cid, "m0"), queued=False, turn_id="t0", taken_at=at(0))
        set_fsm(tx, fsm, now=at(3))
    return cid


def test_load_view_during_a_turn_returns_latest_summary_events_after_it_and_open_calls(store):
    running = FsmState(state="awaiting_input", turn_id="t1", running=("queued",),
                       pending={"open": {"executor": "human", "name": "approve", "expires_at": None}})
    cid = _view_fixture(store, running)
    view = store.log.load_view(cid)
    assert (view.summary.to_seq, view.summary.content) == (4, {"s": 2})
    assert [event.seq for event in view.events] == [5, 6]
    assert [c.id for c in view.open_calls] == ["queued", "open"]
    assert view.inbox == ()  # a message posted during a turn is handled when it is posted
    assert view.last_seq == 6
    assert view.fsm == running


def test_load_view_between_turns_returns_the_untaken_inbox_in_arrival_order_whatever_created_at_says(store):
    cid = _view_fixture(store, FsmState(state="idle", turn_id="t1"))
    view = store.log.load_view(cid)
    assert [item.id for item in view.inbox] == ["m2", "m1"]  # m2 arrived first, with a later created_at
    assert view.inbox[0] == message(cid, "m2", seconds=2)
    assert view.open_calls == ()  # the cached state has none open (inv. 1)


def test_with_history_grows_a_turn_view_to_everything_after_the_summary(store):
    cid = new_conversation(store).id
    append(store, cid, *(user(str(n)) for n in range(6)))
    save_summary(store, conversation_id=cid, from_seq=1, to_seq=2, content={"s": 1}, version=1, now=at(1))
    with store.writes.locked(cid) as tx:
        set_fsm(tx, FsmState(state="running", turn_id="t1", turn_seq=5), now=at(3))
    with store.log.reader(cid) as reader:
        turn = reader.view(turn_only=True)
        assert [event.seq for event in turn.events] == [5, 6]
        whole = reader.with_history(turn)
    assert [event.seq for event in whole.events] == [3, 4, 5, 6]
    assert whole == store.log.load_view(cid)


def test_a_step_reads_the_log_only_up_to_the_rows_next_seq(store):
    """A step's reads are not one snapshot: a commit landing between them must not show.

    The event written here without moving next_seq is what a later statement could see of
    an append committed after the conversation row was read.
    """
    cid = new_conversation(store).id
    append(store, cid, user("a"), user("b"))
    with store.writes.locked(cid) as tx:
        set_fsm(tx, FsmState(state="running", turn_id="t1", turn_seq=2), now=at(3))
    with store.engine.begin() as conn:
        conn.execute(events.insert().values(
            id="late", conversation_id=cid, seq=3, type="user_msg", content={"text": "late"},
            created_at=at(4),
        ))
    with store.log.reader(cid) as reader:
        turn = reader.view(turn_only=True)
        whole = reader.with_history(turn)
    assert [event.seq for event in turn.events] == [2]
    assert [event.seq for event in whole.events] == [1, 2]
    assert whole.last_seq == 2


def test_load_view_without_a_summary_holds_every_event(store):
    cid = new_conversation(store).id
    append(store, cid, user("a"), user("b"))
    view = store.log.load_view(cid)
    assert view.summary is None
    assert [event.seq for event in view.events] == [1, 2]
    assert store.log.load_view("missing") is None


def test_view_inside_locked_sees_its_own_writes(store):
    cid = new_conversation(store).id
    with store.writes.locked(cid) as tx:
        tx.append([user("a")])
        assert [event.seq for event in tx.view().events] == [1]
        assert tx.conversation.next_seq == 2


def test_saving_a_summary_twice_for_one_to_seq_is_a_no_op(store):
    cid = new_conversation(store).id
    assert save_summary(store, conversation_id=cid, from_seq=1, to_seq=3, content={"a": 1}, version=1, now=T0)
    assert not save_summary(store, conversation_id=cid, from_seq=1, to_seq=3, content={"b": 2}, version=2, now=T0)
    with store.writes.locked(cid) as tx:
        assert not tx.save_summary(from_seq=1, to_seq=3, content={}, version=3, now=T0)
    [summary] = store.log.list_summaries(cid)
    assert (summary.content, summary.version, summary.created_at) == ({"a": 1}, 1, T0)


# tool calls and inbox


def test_transition_call_is_conditional(store):
    cid = new_conversation(store).id
    with store.writes.locked(cid) as tx:
        tx.put_tool_calls([call(cid, "c1")])
        first = tx.transition_call("c1", from_statuses=["pending"], to_status="resolved",
                                   now=at(3), result={"ok": True})
        second = tx.transition_call("c1", from_statuses=["pending"], to_status="expired", now=at(4))
    assert (first, second) == (True, False)
    record = store.calls.load(cid, "c1")
    assert (record.status, record.result, record.resolved_at) == ("resolved", {"ok": True}, at(3))


def test_putting_an_existing_tool_call_leaves_it_unchanged(store):
    cid = new_conversation(store).id
    with store.writes.locked(cid) as tx:
        tx.put_tool_calls([call(cid, "c1", expires_at=at(60))])
        tx.put_tool_calls([call(cid, "c1", status="scheduled"), call(cid, "c2")])
        assert tx.load_call("c1") == call(cid, "c1", expires_at=at(60))
    assert [c.id for c in store.calls.list_of(cid, status="pending")] == ["c1", "c2"]


def test_find_inbox_by_key_returns_the_message_with_that_key(store):
    cid = new_conversation(store).id
    with store.writes.locked(cid) as tx:
        tx.add_inbox(message(cid, "m1", key="k1"), queued=True, turn_id="t1", taken_at=None)
        assert tx.find_inbox_by_key("k1") == {"message_id": "m1", "turn_id": "t1", "queued": True,
                                              "request_hash": None}
        assert tx.find_inbox_by_key("k2") is None


def test_a_second_message_with_the_same_idempotency_key_is_a_conflict(store):
    cid = new_conversation(store).id
    with store.writes.locked(cid) as tx:
        tx.add_inbox(message(cid, "m1", key="k1"), queued=True, turn_id=None, taken_at=None)
    with pytest.raises(Conflict), store.writes.locked(cid) as tx:
        tx.add_inbox(message(cid, "m2", key="k1"), queued=True, turn_id=None, taken_at=None)
    assert [item.id for item in store.inbox.list_of(cid, taken=None)] == ["m1"]


def test_take_inbox_is_conditional(store):
    cid = new_conversation(store).id
    with store.writes.locked(cid) as tx:
        tx.add_inbox(message(cid, "m1"), queued=True, turn_id=None, taken_at=None)
        assert tx.take_inbox("m1", turn_id="t1", now=at(1))
        assert not tx.take_inbox("m1", turn_id="t2", now=at(2))
    assert store.inbox.list_of(cid) == []
    assert [item.id for item in store.inbox.list_of(cid, taken=True)] == ["m1"]
    with store.writes.locked(cid) as tx:
        assert tx.view().inbox == ()


def test_list_overdue_calls_returns_pending_calls_past_their_expiry(store):
    cid = new_conversation(store).id
    with store.writes.locked(cid) as tx:
        tx.put_tool_calls([call(cid, "due", expires_at=at(10)), call(cid, "later", expires_at=at(11)),
                           call(cid, "forever"), call(cid, "ran", status="scheduled", expires_at=at(1))])
    assert [c.id for c in store.backlog.list_overdue_calls(now=at(10))] == ["due"]
    assert [c.id for c in store.backlog.list_overdue_calls(now=at(20), limit=1)] == ["due"]


# the steps ledger


def test_scheduling_a_step_twice_is_a_no_op(store):
    cid = new_conversation(store).id
    assert schedule(store, cid, "s1")
    assert not schedule(store, cid, "s1", seconds=5)
    [step] = store.steps.list_of(cid)
    assert (step.status, step.attempts, step.retries, step.created_at) == ("scheduled", 0, 0, T0)
    assert step.ref == {"after_seq": 1} and step.celery_task_id == "task-s1"


@pytest.mark.parametrize("how", ["claim a scheduled step", "schedule and claim a new step"])
def test_only_one_of_many_concurrent_claimants_wins(store, how):
    cid = new_conversation(store).id
    if how == "claim a scheduled step":
        schedule(store, cid, "s1")
    barrier = threading.Barrier(8)
    won: list[str] = []

    def contend(worker: str) -> None:
        barrier.wait()
        if how == "claim a scheduled step":
            claimed = claim(store, "s1", worker=worker, lease_s=30, now=at(1), max_attempts=5)
        else:
            claimed = schedule_and_claim(store, cid, "s1", worker, seconds=1)
        if claimed:
            won.append(worker)

    threads = [threading.Thread(target=contend, args=(f"w{n}",)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1
    step = store.steps.load("s1")
    assert (step.status, step.attempts, step.worker) == ("running", 1, won[0])


def test_a_live_lease_cannot_be_claimed(store):
    cid = new_conversation(store).id
    schedule(store, cid, "s1")
    claim(store, "s1", worker="w1", lease_s=30, now=at(0), max_attempts=5)
    assert claim(store, "s1", worker="w2", lease_s=30, now=at(29), max_attempts=5) is None


def test_an_expired_lease_can_be_claimed_again_and_attempts_increments(store):
    cid = new_conversation(store).id
    schedule(store, cid, "s1")
    claim(store, "s1", worker="w1", lease_s=30, now=at(0), max_attempts=5)
    step = claim(store, "s1", worker="w2", lease_s=30, now=at(31), max_attempts=5)
    assert (step.worker, step.attempts, step.started_at, step.lease_until) == ("w2", 2, at(31), at(61))


def test_a_step_whose_faults_are_used_up_cannot_be_claimed(store):
    cid = new_conversation(store).id
    schedule(store, cid, "s1")
    assert claim(store, "s1", worker="w1", lease_s=30, now=at(0), max_attempts=1)
    assert store.steps.release("s1", worker="w1", status="failed_recoverable", now=at(1), fault=True)
    assert claim(store, "s1", worker="w2", lease_s=30, now=at(2), max_attempts=1) is None


def test_a_worker_dying_under_a_step_among_others_is_no_fault_of_the_step(store):
    cid = new_conversation(store).id
    schedule(store, cid, "s1")
    for n in range(ALONE_AFTER_DEATHS + 1):  # its workers die under it and others, twice
        step = claim(store, "s1", worker=f"w{n}", lease_s=30, now=at(31 * n), max_attempts=1,
                     alone=n == ALONE_AFTER_DEATHS)
        assert step is not None and step.attempts == n + 1
    assert (step.faults, step.deaths) == (0, ALONE_AFTER_DEATHS)
    assert not store.steps.give_up("s1", max_attempts=1, now=at(31 * ALONE_AFTER_DEATHS + 1))


def test_a_step_that_died_twice_with_others_is_claimed_only_by_a_worker_that_runs_it_alone(store):
    cid = new_conversation(store).id
    schedule(store, cid, "s1")
    claim(store, "s1", worker="w1", lease_s=30, now=at(0), max_attempts=5)
    claim(store, "s1", worker="w2", lease_s=30, now=at(31), max_attempts=5)
    assert claim(store, "s1", worker="w3", lease_s=30, now=at(62), max_attempts=5) is None
    assert runs_alone(store.steps.load("s1"), now=at(62), max_attempts=5)
    taken = claim(store, "s1", worker="w3", lease_s=30, now=at(62), max_attempts=5, alone=True)
    assert (taken.worker, taken.deaths, taken.faults) == ("w3", ALONE_AFTER_DEATHS, 0)


def test_each_death_of_a_step_running_alone_is_its_fault_until_it_is_given_up(store):
    cid = new_conversation(store).id
    schedule(store, cid, "s1")
    for n in range(ALONE_AFTER_DEATHS + 2):
        assert claim(store, "s1", worker=f"w{n}", lease_s=30, now=at(31 * n), max_attempts=2,
                     alone=True)
    assert store.steps.load("s1").faults == 1  # the last attempt's death is not yet seen
    now = at(31 * (ALONE_AFTER_DEATHS + 2))
    assert not runs_alone(store.steps.load("s1"), now=now, max_attempts=2)
    assert claim(store, "s1", worker="late", lease_s=30, now=now, max_attempts=2, alone=True) is None
    assert store.steps.give_up("s1", max_attempts=2, now=now)
    assert (store.steps.load("s1").status, store.steps.load("s1").faults) == ("failed_permanent", 2)


def test_schedule_and_claim_inserts_a_new_step_already_claimed(store):
    cid = new_conversation(store).id
    step = schedule_and_claim(store, cid, "s1", "w1", seconds=2)
    assert (step.status, step.attempts, step.worker, step.lease_until) == ("running", 1, "w1", at(32))
    assert (step.created_at, step.started_at, step.celery_task_id) == (at(2), at(2), "task-s1-w1")
    assert store.steps.load("s1") == step


def test_schedule_and_claim_follows_the_claim_rules_on_an_existing_step(store):
    cid = new_conversation(store).id
    schedule_and_claim(store, cid, "s1", "w1", seconds=0)
    assert schedule_and_claim(store, cid, "s1", "w2", seconds=29) is None  # live lease
    taken = schedule_and_claim(store, cid, "s1", "w2", seconds=31)  # the lease ran out
    assert (taken.worker, taken.attempts, taken.created_at, taken.started_at) == ("w2", 2, at(0), at(31))
    assert taken.celery_task_id == "task-s1-w2"  # the ledger names the task running it now
    assert store.steps.release("s1", worker="w2", status="failed_recoverable", now=at(32),
                               fault=True)
    assert schedule_and_claim(store, cid, "s1", "w3", seconds=33, max_attempts=1) is None  # used up
    assert schedule_and_claim(store, cid, "s1", "w3", seconds=33).attempts == 3
    with store.writes.locked(cid) as tx:
        assert tx.finish_step("s1", worker="w3", now=at(34))
    assert schedule_and_claim(store, cid, "s1", "w4", seconds=999) is None  # finished
    assert store.steps.load("s1").status == "succeeded"


def test_giving_up_a_used_up_step_marks_it_failed_permanent_once(store):
    cid = new_conversation(store).id
    schedule(store, cid, "s1")
    claim(store, "s1", worker="w1", lease_s=30, now=at(0), max_attempts=1)
    assert store.steps.release("s1", worker="w1", status="failed_recoverable", now=at(1),
                               fault=True)
    assert not store.steps.give_up("s1", max_attempts=2, now=at(31))
    assert store.steps.give_up("s1", max_attempts=1, now=at(31))
    assert not store.steps.give_up("s1", max_attempts=1, now=at(32))
    step = store.steps.load("s1")
    assert (step.status, step.finished_at, step.lease_until) == ("failed_permanent", at(31), None)


def test_finish_step_by_a_worker_that_lost_the_lease_returns_false(store):
    cid = new_conversation(store).id
    schedule(store, cid, "s1")
    claim(store, "s1", worker="w1", lease_s=30, now=at(0), max_attempts=5)
    claim(store, "s1", worker="w2", lease_s=30, now=at(31), max_attempts=5)
    with store.writes.locked(cid) as tx:
        assert not tx.finish_step("s1", worker="w1", now=at(40))
        assert tx.finish_step("s1", worker="w2", now=at(41))
        assert load_step_in(tx, "s1").status == "succeeded"
    step = store.steps.load("s1")
    assert (step.status, step.finished_at, step.lease_until) == ("succeeded", at(41), None)


def test_heartbeat_renews_the_lease_only_for_the_owner(store):
    cid = new_conversation(store).id
    schedule(store, cid, "s1")
    claim(store, "s1", worker="w1", lease_s=30, now=at(0), max_attempts=5)
    assert store.steps.heartbeat("s1", worker="w1", lease_s=30, now=at(20))
    assert not store.steps.heartbeat("s1", worker="w2", lease_s=300, now=at(21))
    assert store.steps.load("s1").lease_until == at(50)


def test_leases_renewed_in_one_statement_only_for_steps_still_ours(store):
    cid = new_conversation(store).id
    for key, worker in (("s1", "w1"), ("s2", "w1"), ("s3", "w2")):
        schedule(store, cid, key)
        claim(store, key, worker=worker, lease_s=30, now=at(0), max_attempts=5)
    store.steps.release("s2", worker="w1", status="cancelled", now=at(5))
    held = [("s1", "w1"), ("s2", "w1"), ("s3", "w1")]  # s3 is w2's, not w1's
    assert store.leases.list_owned(held) == {"s1"}
    assert store.leases.renew(held, lease_s=30, now=at(20)) == {"s1"}
    assert store.steps.load("s1").lease_until == at(50)
    assert store.steps.load("s3").lease_until == at(30)


def test_a_released_recoverable_step_can_be_claimed_again(store):
    cid = new_conversation(store).id
    schedule(store, cid, "s1")
    claim(store, "s1", worker="w1", lease_s=30, now=at(0), max_attempts=5)
    assert not store.steps.release("s1", worker="w2", status="failed_recoverable", now=at(1))
    assert store.steps.release("s1", worker="w1", status="failed_recoverable", now=at(1), error="503")
    step = store.steps.load("s1")
    assert (step.status, step.last_error, step.lease_until, step.finished_at) == (
        "failed_recoverable", "503", None, None)
    assert claim(store, "s1", worker="w2", lease_s=30, now=at(2), max_attempts=5).attempts == 2


def test_releasing_a_step_as_terminal_sets_finished_at(store):
    cid = new_conversation(store).id
    schedule(store, cid, "s1")
    claim(store, "s1", worker="w1", lease_s=30, now=at(0), max_attempts=5)
    assert store.steps.release("s1", worker="w1", status="failed_permanent", now=at(3), error="400")
    assert store.steps.load("s1").finished_at == at(3)
    assert claim(store, "s1", worker="w1", lease_s=30, now=at(99), max_attempts=5) is None
    with pytest.raises(ValueError):
        store.steps.release("s1", worker="w1", status="succeeded", now=at(4))


def test_add_step_retry_counts_retries(store):
    cid = new_conversation(store).id
    schedule(store, cid, "s1")
    store.steps.add_retry("s1")
    store.steps.add_retry("s1")
    assert store.steps.load("s1").retries == 2


def test_list_stale_steps_returns_expired_leases_and_old_waiting_steps(store):
    cid = new_conversation(store).id
    for key, seconds in [("expired", 0), ("live", 0), ("old", 1), ("fresh", 50), ("done", 0)]:
        schedule(store, cid, key, seconds=seconds)
    claim(store, "expired", worker="w", lease_s=10, now=at(0), max_attempts=5)
    claim(store, "live", worker="w", lease_s=100, now=at(0), max_attempts=5)
    claim(store, "done", worker="w", lease_s=10, now=at(0), max_attempts=5)
    with store.writes.locked(cid) as tx:
        tx.finish_step("done", worker="w", now=at(1))
    stale = store.backlog.list_stale_steps(now=at(20), scheduled_before=at(30))
    assert sorted(step.step_key for step, _ in stale) == ["expired", "old"]


def test_delete_finished_steps_removes_only_old_finished_steps(store):
    cid = new_conversation(store).id
    for key in ["old", "new", "recoverable", "waiting"]:
        schedule(store, cid, key)
        if key != "waiting":
            claim(store, key, worker="w", lease_s=10, now=at(0), max_attempts=5)
    store.steps.release("old", worker="w", status="cancelled", now=at(1))
    store.steps.release("new", worker="w", status="timeout", now=at(100))
    store.steps.release("recoverable", worker="w", status="failed_recoverable", now=at(1))
    assert store.steps.delete_finished(finished_before=at(50)) == 1
    assert sorted(step.step_key for step in store.steps.list_of(cid)) == ["new", "recoverable", "waiting"]


# engines and migrations


def test_a_plain_postgresql_url_uses_psycopg_3():
    engine = create_engine("postgresql://postgres@127.0.0.1:5432/test")
    assert engine.url.drivername == "postgresql+psycopg"
    engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_url(request: pytest.FixtureRequest, sqlite_url_factory: Callable[..., str]) -> str:
    if request.param == "sqlite":
        return sqlite_url_factory(migrated=False)
    return request.getfixturevalue("pg_database_factory")()


def test_migrate_creates_every_table_and_running_it_twice_is_harmless(empty_url):
    store = Store.open(empty_url)
    try:
        store.migrate()
        store.migrate()
        tables = set(sa.inspect(store.engine).get_table_names())
        assert tables == set(metadata.tables) | {"alembic_version"}
    finally:
        store.dispose()


def test_the_migrated_schema_matches_the_tables(store):
    with store.engine.connect() as conn:
        context = MigrationContext.configure(conn)
        assert compare_metadata(context, metadata) == []


# transactions

@pytest.mark.postgres
def test_a_postgres_read_is_a_read_only_repeatable_read_snapshot_and_leaves_no_trace(pg_url):
    from agentq.store.engine import begin_read, begin_write

    engine = create_engine(pg_url)
    engine.pool.dispose()
    try:
        show = "SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only')"
        with begin_read(engine) as conn:
            assert conn.exec_driver_sql(show).one() == ("repeatable read", "on")
            with pytest.raises(sa.exc.InternalError, match="read-only transaction"):
                conn.exec_driver_sql("CREATE TEMP TABLE must_fail (x int)")
        # the same pooled connection is a plain read-committed writer again
        with begin_write(engine) as conn:
            assert conn.exec_driver_sql(show).one() == ("read committed", "off")
        assert engine.pool.checkedin() == 1
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_lone_postgres_statement_runs_in_autocommit_and_the_pool_forgets_it(pg_url):
    from agentq.store.engine import begin_read, begin_write

    engine = create_engine(pg_url)
    engine.pool.dispose()
    try:
        with begin_write(engine, one_statement=True) as conn:
            assert conn.connection.dbapi_connection.autocommit
            conn.exec_driver_sql("CREATE TABLE lone (x int)")
        with begin_read(engine, one_snapshot=False) as conn:
            assert conn.connection.dbapi_connection.autocommit
            assert conn.exec_driver_sql("SELECT count(*) FROM lone").scalar() == 0
            with begin_write(engine) as other:  # commits between the two reads
                other.exec_driver_sql("INSERT INTO lone VALUES (1)")
            assert conn.exec_driver_sql("SELECT count(*) FROM lone").scalar() == 1
        assert engine.pool.checkedin() == 2
        with begin_write(engine) as conn, begin_write(engine) as second:
            # both pooled connections are transactional again once back from the pool
            assert not conn.connection.dbapi_connection.autocommit
            assert not second.connection.dbapi_connection.autocommit
    finally:
        with begin_write(engine) as conn:
            conn.exec_driver_sql("DROP TABLE IF EXISTS lone")
        engine.dispose()


@pytest.mark.postgres
def test_a_pooled_connection_the_server_dropped_while_idle_is_replaced_before_use(pg_url, monkeypatch):
    import psycopg

    from agentq.store.dialects import postgres as engines

    monkeypatch.setattr(engines, "PING_AFTER_IDLE_S", 0.0)
    store = Store.open(pg_url)
    try:
        cid = new_conversation(store).id
        with store.engine.connect() as conn:
            pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        with psycopg.connect(pg_url.replace("+psycopg", ""), autocommit=True) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]
        assert store.engine.pool.checkedin() == 1  # the dead connection waits in the pool
        assert store.conversations.load(cid).id == cid  # checked on checkout, replaced
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT pg_backend_pid()").scalar() != pid
    finally:
        store.dispose()


@pytest.mark.postgres
def test_a_statement_is_prepared_on_a_connection_once_it_has_run_there(pg_url):
    """Prepared from its second run on, not its sixth (psycopg's default): a fresh worker's
    hot statements are otherwise parsed and planned anew on each of its pooled connections."""
    engine = create_engine(pg_url, pool_size=1)
    try:
        statement = "SELECT count(*) FROM pg_class WHERE relname = %(name)s"
        prepared = "SELECT count(*) FROM pg_prepared_statements WHERE strpos(statement, %(text)s) > 0"
        mark = {"text": "FROM pg_class WHERE relname"}  # in the statement, not in this read
        with engine.connect() as conn:
            conn.exec_driver_sql(statement, {"name": "a"})
            assert conn.exec_driver_sql(prepared, mark).scalar() == 0  # a statement run once is not
            conn.exec_driver_sql(statement, {"name": "b"})
            assert conn.exec_driver_sql(prepared, mark).scalar() == 1
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_result_is_described_only_when_its_columns_are_read_and_as_of_its_statement(
        pg_url, monkeypatch):
    """SQLAlchemy asks after every statement whether it has a description; psycopg built a
    Column per column to answer. The columns are built on first read, from their own result
    even after the cursor ran another statement."""
    import psycopg

    built = []
    column_init = psycopg.Column.__init__

    def counting(self, cursor, index):
        built.append(index)
        column_init(self, cursor, index)

    monkeypatch.setattr(psycopg.Column, "__init__", counting)
    engine = create_engine(pg_url, pool_size=1)
    try:
        with engine.connect() as conn:
            cursor = conn.connection.driver_connection.cursor()
            built.clear()  # connecting read a few descriptions of its own
            cursor.execute("SELECT 1 AS one, 'x' AS two")
            first = cursor.description
            assert first is not None and len(first) == 2
            assert built == []  # asked whether there is one, and how long: nothing built
            cursor.execute("SELECT 3 AS three")
            assert [column.name for column in first] == ["one", "two"]
            assert [column.name for column in cursor.description] == ["three"]
            cursor.execute("CREATE TEMP TABLE described (id int)")
            assert cursor.description is None
            assert list(conn.execute(sa.text("SELECT 1 AS a, 2 AS b")).keys()) == ["a", "b"]
    finally:
        engine.dispose()


@pytest.mark.parametrize("text", [
    '{"a": [1, 2.5, null, true], "b": {"c": "d"}}',
    '{"big": 123456789012345678901234567890, "small": -0.000001}',
    '"h\\u00e9llo \\ud83d\\ude00 w\\u00f6rld"',
    '{"emoji": "\U0001F600", "accents": "\u00e9\u00e8"}',
    '[]',
])
def test_json_from_postgresql_is_decoded_as_json_loads_decodes_it(text):
    from agentq.store.dialects.json_loads import json_from_utf8

    data = text.encode()
    assert json_from_utf8(data) == json.loads(data)


@pytest.mark.postgres
def test_a_connection_in_utf8_decodes_json_without_guessing_its_encoding(pg_url):
    from psycopg.pq import Format

    from agentq.store.dialects.json_loads import json_from_utf8

    engine = create_engine(pg_url, pool_size=1)
    try:
        with engine.connect() as conn:
            raw = conn.connection.driver_connection
            jsonb = raw.adapters.types["jsonb"].oid
            assert raw.adapters.get_loader(jsonb, Format.TEXT)._loads is json_from_utf8
            value = conn.execute(sa.text("""SELECT '{"a": [1, "\u00e9"]}'::jsonb""")).scalar_one()
            assert value == {"a": [1, "\u00e9"]}
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_pooled_connection_opens_in_autocommit_and_comes_back_out_of_any_transaction(pg_url):
    """Connections open in autocommit (a lone statement needs no BEGIN); a transaction is set
    up per use and undone at checkin, and one left open is rolled back there."""
    from psycopg.pq import TransactionStatus

    from agentq.store.engine import begin_read, begin_write

    engine = create_engine(pg_url, pool_size=1)
    try:
        with begin_write(engine, one_statement=True) as conn:
            raw = conn.connection.driver_connection
            assert raw.autocommit
        with begin_write(engine) as conn:
            assert not raw.autocommit and conn.connection.driver_connection is raw
            conn.execute(sa.text("SELECT 1"))
            assert raw.info.transaction_status == TransactionStatus.INTRANS
        with begin_read(engine) as conn:  # a snapshot: REPEATABLE READ, read only
            assert conn.execute(sa.text("SHOW transaction_isolation")).scalar_one() == \
                "repeatable read"
        assert raw.autocommit and raw.info.transaction_status == TransactionStatus.IDLE
        pooled = engine.raw_connection()  # a transaction left open by whoever held it
        pooled.driver_connection.execute("BEGIN")
        assert pooled.driver_connection.info.transaction_status == TransactionStatus.INTRANS
        pooled.close()
        assert raw.info.transaction_status == TransactionStatus.IDLE
    finally:
        engine.dispose()
