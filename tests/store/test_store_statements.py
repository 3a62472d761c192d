"""The statements that stand in for several: what each must still say, on SQLite and PostgreSQL."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

import pytest
from sqlalchemy import delete, event, text
from sqlalchemy.engine.interfaces import CacheStats

from agentq.core.events import FsmState
from agentq.core.settings import Settings
from agentq.core.token_budgets import WHOLE
from agentq.core.usage import Tokens
from agentq.errors import Stale
from agentq.store import NewStep, Store, claims, dialects, step_commit
from agentq.store.eventlog import MERGED_EVENTS
from agentq.store.schema import conversations, events
from agentq.store.step_commit import MERGED_ROWS, Counted
from agentq.store.usage import usage_key
from tests.store.test_store import append, at, call, message, new_conversation, user
from tests.support.store import claim, save_summary, schedule_step, set_fsm
from tests.support.turn_fixtures import clock, commands, providers, runtime  # noqa: F401
from tests.support.turns import WEATHER, start


@pytest.fixture
def cached_store(db_url: str) -> Iterator[Store]:
    """A store that keeps the events it reads, as a worker's does."""
    opened = Store.open(db_url, event_cache=8)
    yield opened
    opened.dispose()


@contextmanager
def counted(store: Store) -> Iterator[list[str]]:
    """The statements the store sends while the block runs (SQLite's BEGINs left out)."""
    sent: list[str] = []

    def _sent(_conn, _cursor, statement, *_args) -> None:
        if statement.split(None, 1)[0].upper() != "BEGIN":
            sent.append(statement)

    event.listen(store.engine, "before_cursor_execute", _sent)
    try:
        yield sent
    finally:
        event.remove(store.engine, "before_cursor_execute", _sent)


def running_turn(store: Store, cid: str, *, turn_seq: int) -> None:
    with store.writes.locked(cid) as tx:
        set_fsm(tx, FsmState(state="running", turn_id="t1", turn_seq=turn_seq), now=at(3))


def turn_events(store: Store, cid: str) -> list[int]:
    with store.log.reader(cid) as reader:
        view = reader.view(turn_only=True)
        return [] if view is None else [e.seq for e in view.events]


def test_a_view_whose_earlier_events_are_cached_is_read_in_one_statement(cached_store):
    cid = new_conversation(cached_store).id
    append(cached_store, cid, user("a"), user("b"))
    running_turn(cached_store, cid, turn_seq=1)
    assert turn_events(cached_store, cid) == [1, 2]
    append(cached_store, cid, user("c"), user("d"))
    with counted(cached_store) as sent:
        with cached_store.log.reader(cid) as reader:
            view = reader.view(turn_only=True)
    assert len(sent) == 1
    assert view.events == cached_store.log.load_view(cid).events
    assert [e.seq for e in view.events] == [1, 2, 3, 4]


def test_events_read_with_the_row_stop_below_its_next_seq(cached_store):
    """An event past next_seq stands for an append that commits while the statement runs."""
    cid = new_conversation(cached_store).id
    append(cached_store, cid, user("a"))
    running_turn(cached_store, cid, turn_seq=1)
    assert turn_events(cached_store, cid) == [1]
    append(cached_store, cid, user("b"))
    with cached_store.engine.begin() as conn:
        conn.execute(events.insert().values(
            id="late", conversation_id=cid, seq=3, type="user_msg", content={"text": "late"},
            created_at=at(4),
        ))
    assert turn_events(cached_store, cid) == [1, 2]


def test_a_cached_conversation_that_is_gone_has_no_view(cached_store):
    cid = new_conversation(cached_store).id
    append(cached_store, cid, user("a"), user("b"))
    assert turn_events(cached_store, cid) == [1, 2]
    with cached_store.engine.begin() as conn:
        conn.execute(delete(conversations).where(conversations.c.id == cid))
    with cached_store.log.reader(cid) as reader:
        assert reader.view(turn_only=True) is None


def test_a_view_read_with_cached_events_starts_after_a_newer_summary(cached_store):
    cid = new_conversation(cached_store).id
    append(cached_store, cid, user("a"), user("b"))
    assert turn_events(cached_store, cid) == [1, 2]
    append(cached_store, cid, user("c"), user("d"))
    save_summary(cached_store, conversation_id=cid, from_seq=1, to_seq=3, content={"s": 1},
                 version=1, now=at(1))
    with cached_store.log.reader(cid) as reader:
        view = reader.view()
    assert view.summary.to_seq == 3
    assert [e.seq for e in view.events] == [4]
    assert view.events == cached_store.log.load_view(cid).events


def test_a_view_with_nothing_new_after_the_cached_events_reads_only_the_row(cached_store):
    cid = new_conversation(cached_store).id
    append(cached_store, cid, user("a"))
    running_turn(cached_store, cid, turn_seq=1)
    first = turn_events(cached_store, cid)
    with counted(cached_store) as sent:
        again = turn_events(cached_store, cid)
    assert first == again == [1]
    assert len(sent) == 1


def model_usage(cid: str, tokens: Tokens, *, now: datetime) -> Counted:
    """The tokens of a call to model m1, counted where a conversation of acme's counts them."""
    key = usage_key(cid, tenant="acme", settings=Settings(), agent=None, parent=None,
                    model="m1")
    return step_commit.counted(key, tokens, now=now)


def assert_counted_once(store: Store, cid: str, tokens: Tokens) -> None:
    """`tokens` (42 of them) count once in the rollups and in each of acme's running totals."""
    spent = store.usage.load_spent(cid)
    assert {(m.scope, m.period): n for m, n in spent.totals.items()} == {
        ("tenant", "hour"): 42, ("tenant", "day"): 42, ("tenant", "month"): 42,
        ("conversation", WHOLE): 42}
    [row] = store.usage.report(tenant="acme", start=at(0), end=at(3600), group_by="hour",
                               by=(), limit=10)
    assert row.tokens == tokens


def running_step(store: Store, cid: str, key: str, *, worker: str) -> None:
    schedule_step(store, step_key=key, conversation_id=cid, kind="llm", ref={"after_seq": 0},
                  round_id="r1", celery_task_id="task-" + key, now=at(1))
    assert claim(store, key, worker=worker, lease_s=30, now=at(1), max_attempts=5) is not None


def tool_step(cid: str, call_id: str) -> NewStep:
    return NewStep("tool-" + call_id, cid, "tool", {"tool_call_id": call_id}, "r1",
                   "task-" + call_id, "acme")


def committing(store: Store, cid: str):
    """A commit's transaction: one event appended, which takes the lock."""
    next_seq = store.conversations.load(cid).next_seq
    return store.writes.appending(cid, [user("answer", 2)], next_seq=next_seq,
                                  state_after=lambda _: FsmState(), now=at(2))


def test_finishing_with_the_rounds_calls_writes_the_calls_and_schedules_their_steps(store):
    cid = new_conversation(store).id
    running_step(store, cid, "llm-1", worker="w1")
    calls = [call(cid, "c1", status="scheduled"), call(cid, "c2")]
    with committing(store, cid) as (tx, _):
        assert tx.finish_scheduling("llm-1", worker="w1", calls=calls,
                                    scheduled=[tool_step(cid, "c1")], now=at(2))
    assert store.calls.list_of(cid) == calls
    assert store.steps.load("llm-1").status == "succeeded"
    assert store.steps.load("tool-c1").status == "scheduled"


def test_a_second_commit_of_the_same_shape_reuses_every_compiled_statement(store):
    """SQLAlchemy compiles a statement once and keeps it only if it can key it (a multi-row
    VALUES it cannot): a commit compiled anew each time costs more CPU than its round trip."""
    compiled: list[str] = []

    def _executed(_conn, _cursor, statement, _params, context, _many) -> None:
        if context.compiled is not None and context.cache_hit != CacheStats.CACHE_HIT:
            compiled.append(statement)

    def commit_round() -> None:
        cid = new_conversation(store).id
        running_step(store, cid, "llm-" + cid, worker="w1")
        calls = [call(cid, "c1", status="scheduled"), call(cid, "c2", status="scheduled")]
        with committing(store, cid) as (tx, _):
            assert tx.finish_scheduling("llm-" + cid, worker="w1", calls=calls, now=at(2),
                                        scheduled=[tool_step(cid, "c1"), tool_step(cid, "c2")])

    commit_round()
    event.listen(store.engine, "after_cursor_execute", _executed)
    try:
        commit_round()
    finally:
        event.remove(store.engine, "after_cursor_execute", _executed)
    assert compiled == []


def test_a_lost_step_finishes_with_its_calls_as_nothing_written(store):
    cid = new_conversation(store).id
    running_step(store, cid, "llm-1", worker="w-new")
    before = store.conversations.load(cid)
    with pytest.raises(Stale):
        with committing(store, cid) as (tx, _):
            if not tx.finish_scheduling("llm-1", worker="w-old", calls=[call(cid, "c1")],
                                        scheduled=[tool_step(cid, "c1")], now=at(2)):
                raise Stale("the step is no longer ours")
    assert store.calls.list_of(cid) == []
    assert store.steps.load("tool-c1") is None
    assert store.steps.load("llm-1").status == "running"
    assert store.conversations.load(cid) == before and store.log.list_events(cid) == []


def test_finishing_the_last_round_says_whether_a_message_waits(store):
    cid = new_conversation(store).id
    running_step(store, cid, "llm-1", worker="w1")
    running_step(store, cid, "llm-2", worker="w1")
    with committing(store, cid) as (tx, _):
        assert tx.finish_seeing_inbox("llm-1", worker="w1", now=at(2)) == (True, False)
    with store.writes.locked(cid) as tx:
        tx.add_inbox(message(cid, "m1"), queued=True, turn_id=None, taken_at=None)
    with committing(store, cid) as (tx, _):
        assert tx.finish_seeing_inbox("llm-2", worker="w1", now=at(3)) == (True, True)


def test_finishing_a_lost_step_of_the_last_round_says_so(store):
    cid = new_conversation(store).id
    running_step(store, cid, "llm-1", worker="w-new")
    with committing(store, cid) as (tx, _):
        finished, _waiting = tx.finish_seeing_inbox("llm-1", worker="w-old", now=at(2))
    assert not finished
    assert store.steps.load("llm-1").status == "running"


def test_finishing_a_tool_step_whose_call_was_closed_meanwhile_says_which(store):
    cid = new_conversation(store).id
    with store.writes.locked(cid) as tx:
        tx.put_tool_calls([call(cid, "c1", status="scheduled"), call(cid, "c2", status="done")])
    running_step(store, cid, "tool-1", worker="w1")
    running_step(store, cid, "tool-2", worker="w1")
    done = {"status": "ok", "output": 1}
    with committing(store, cid) as (tx, _):
        assert tx.finish_closing_call("tool-2", worker="w1", call_id="c2", result=done,
                                      now=at(2)) == (True, False)
        assert tx.finish_closing_call("tool-1", worker="w-old", call_id="c1", result=done,
                                      now=at(2)) == (False, True)
        assert tx.finish_closing_call("tool-1", worker="w1", call_id="c1", result=done,
                                      now=at(2)) == (True, False)  # closed by the one before
    assert store.calls.load(cid, "c1").result == done


def test_a_tool_steps_commit_writes_in_two_statements_on_postgres(store):
    """The append (row and events) and the finish with the call's close; SQLite, in
    process, sends each write on its own."""
    cid = new_conversation(store).id
    with store.writes.locked(cid) as tx:
        tx.put_tool_calls([call(cid, "c1", status="scheduled")])
    running_step(store, cid, "tool-1", worker="w1")
    commit = committing(store, cid)
    with counted(store) as sent:
        with commit as (tx, appended):
            assert tx.finish_closing_call("tool-1", worker="w1", call_id="c1",
                                          result={"status": "ok"}, now=at(2)) == (True, True)
    assert len(sent) == {"postgresql": 2, "sqlite": 4}[store.engine.dialect.name]
    assert store.log.list_events(cid) == appended
    assert store.conversations.load(cid).next_seq == 2


def test_an_append_of_several_events_from_a_moved_log_inserts_none(store):
    cid = new_conversation(store).id
    append(store, cid, user("a"))
    with pytest.raises(Stale):
        with store.writes.appending(cid, [user("b"), user("c")], next_seq=1,
                                    state_after=lambda _: FsmState(), now=at(2)):
            pass
    assert [e.seq for e in store.log.list_events(cid)] == [1]
    assert store.conversations.load(cid).next_seq == 2


def test_an_append_longer_than_one_statement_holds_lands_whole(store):
    cid = new_conversation(store).id
    drafts = [user(str(n)) for n in range(MERGED_EVENTS * 2 + 1)]
    with store.writes.appending(cid, drafts, next_seq=1, state_after=lambda _: FsmState(),
                                now=at(2)) as (_, appended):
        pass
    assert [e.seq for e in store.log.list_events(cid)] == [e.seq for e in appended]
    assert store.conversations.load(cid).next_seq == len(drafts) + 1


def test_a_round_with_more_calls_than_one_statement_holds_writes_them_all(store):
    cid = new_conversation(store).id
    running_step(store, cid, "llm-1", worker="w1")
    ids = [f"c{n}" for n in range(MERGED_ROWS + 2)]
    calls = [call(cid, call_id, status="scheduled") for call_id in ids]
    with committing(store, cid) as (tx, _):
        assert tx.finish_scheduling("llm-1", worker="w1", calls=calls,
                                    scheduled=[tool_step(cid, c) for c in ids], now=at(2))
    assert len(store.calls.list_of(cid)) == len(ids)
    assert all(store.steps.load("tool-" + c).status == "scheduled" for c in ids)


def test_a_model_steps_tokens_are_counted_by_the_statement_that_finishes_it(store):
    """The usage rollup and the budgets' running totals (the tenant's per period and the
    conversation's) go with the finish: no round trip of their own on PostgreSQL, and a
    finish that lost its step counts nothing."""
    cid = new_conversation(store).id
    running_step(store, cid, "llm-1", worker="w1")
    running_step(store, cid, "llm-2", worker="w-new")
    tokens = Tokens(input_tokens=30, output_tokens=12, calls=1)
    commit = committing(store, cid)
    with counted(store) as sent:
        with commit as (tx, _):
            usage = model_usage(cid, tokens, now=at(2))
            assert tx.finish_seeing_inbox("llm-1", worker="w1", now=at(2), usage=usage) == (
                True, False)
    assert len(sent) == {"postgresql": 2, "sqlite": 6}[store.engine.dialect.name]
    with pytest.raises(Stale), committing(store, cid) as (tx, _):
        usage = model_usage(cid, tokens, now=at(3))
        if not tx.finish_seeing_inbox("llm-2", worker="w-old", now=at(3), usage=usage)[0]:
            raise Stale("the step is no longer ours")
    assert_counted_once(store, cid, tokens)



@pytest.mark.parametrize("cap, kinds", [(None, None), (None, ("llm", "compact")), (2, None)])
def test_a_claim_commits_without_waiting_for_the_disk_and_only_its_own_transaction(
        store: Store, cap, kinds):
    """A claim is a lease: whatever its step makes durable later (a start mark, the step's
    commit) is flushed after it, so its own commit need not wait for the flush. The setting
    lasts for its transaction only: what the connection runs next waits as before."""
    if store.dialect.name != "postgresql":
        pytest.skip("SQLite syncs per connection (PRAGMA synchronous), not per transaction")
    cid = new_conversation(store).id
    step = NewStep("s1", cid, "llm", {"after_seq": 1}, None, "task", "acme")
    with store.engine.connect() as conn:
        conn.execution_options(**dialects.of(conn).write_options(one_statement=False))
        with conn.begin():
            claimed = claims.schedule_and_claim_step_txn(
                conn, step, worker="w1", lease_s=30, now=at(1), max_attempts=5, cap=cap,
                cap_kinds=kinds)
            assert claimed is not None and claimed.status == "running"
            assert conn.execute(text("SHOW synchronous_commit")).scalar_one() == "off"
        assert conn.execute(text("SHOW synchronous_commit")).scalar_one() == "on"


def test_no_statement_of_a_turn_is_rendered_anew_when_it_runs(store, runtime, commands):
    """An IN of a Python list is an expanding parameter: SQLAlchemy renders it into the
    statement's SQL at every execution, a cost a hot statement (a claim, a commit) must not
    pay. Every statement a turn of model -> tool -> model sends keeps its compiled SQL."""
    rendered: list[str] = []

    def _executed(_conn, _cursor, statement, _params, context, _many) -> None:
        compiled = context.compiled
        if compiled is not None and (compiled.post_compile_params
                                     or compiled.literal_execute_params):
            rendered.append(statement)

    event.listen(store.engine, "after_cursor_execute", _executed)
    try:
        cid, _ = start(commands, runtime, WEATHER)
    finally:
        event.remove(store.engine, "after_cursor_execute", _executed)
    assert [e.type for e in store.log.list_events(cid)][-3:] == [
        "tool_call", "tool_result", "assistant_msg"]
    assert rendered == []
