"""post_message without the conversation's lock (agentq.store.posting): a message that starts
a turn is written as under the lock, a log that moved since the read is decided again under
the lock, and a plain post costs two statements on PostgreSQL where it cost six round trips."""
from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

import pytest
from sqlalchemy import event, select, text

from agentq.commands import Commands
from agentq.commands.conversations import MessageAnswer
from agentq.core import drafts
from agentq.core.events import InboxItem
from agentq.errors import Conflict, InvalidInput
from agentq.store import ConversationTxn, Store
from agentq.store.schema import inbox
from agentq.tools import Registry
from tests.support.clock import T0
from tests.support.drive import drain
from tests.support.turns import SCOPE


def locked_only(commands: Commands, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every post decides under the lock, as every post did before the unlocked path."""
    monkeypatch.setattr(commands, "_post_unlocked", lambda *args, **kwargs: None)


def stale_read(store: Store, monkeypatch: pytest.MonkeyPatch, cid: str, key: str | None = None
               ) -> None:
    """The next unlocked read of the conversation returns what it reads now."""
    seen = store.writes.posting(cid, key)
    monkeypatch.setattr(store.writes, "posting", lambda *args: seen)


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def written(store: Store, cid: str, answers: list[Any]) -> Any:
    """The conversation's log, inbox rows and row, and the answers, with each id a post draws
    at random (the conversation's, the message's, the turn's, an event's) named by where it
    first appears: two conversations posted to alike compare equal."""
    with store.engine.connect() as conn:
        rows = [dict(row._mapping) for row in conn.execute(
            select(inbox).where(inbox.c.conversation_id == cid).order_by(inbox.c.arrival))]
    row = store.conversations.load(cid)
    assert row is not None
    said = json.dumps({
        "events": [asdict(e) for e in store.log.list_events(cid)],
        "inbox": rows,
        "row": {"status": row.status, "next_seq": row.next_seq, "fsm": row.fsm.to_json(),
                "updated_at": row.updated_at},
        "answers": answers,
    }, default=str, sort_keys=True)
    names: dict[str, str] = {}
    return json.loads(_UUID.sub(lambda m: names.setdefault(m.group(), f"id{len(names)}"), said))


def post_three(commands: Commands, cid: str) -> list[Any]:
    """A message that starts a turn, one that waits behind it, and the first one again."""
    answers = []
    for said, key in (("one", "k1"), ("two", None), ("one", "k1")):
        answer, follow = commands.post_message(cid, said, SCOPE, idempotency_key=key,
                                               unattended={"after_s": 60} if key else None)
        answers.append([answer.to_json(), [asdict(f) for f in follow]])
    return answers


def test_a_message_that_starts_a_turn_is_written_as_under_the_lock(store, commands, monkeypatch):
    unlocked = commands.create_conversation(SCOPE, {}).id
    posted = written(store, unlocked, post_three(commands, unlocked))
    locked_only(commands, monkeypatch)
    locked = commands.create_conversation(SCOPE, {}).id
    assert posted == written(store, locked, post_three(commands, locked))
    assert [e["type"] for e in posted["events"]] == ["user_msg"]
    assert [(r["queued"], r["taken_at"] is not None) for r in posted["inbox"]] == [
        (False, True), (True, False)]


def test_a_post_read_before_another_started_a_turn_waits_behind_it(store, commands, monkeypatch):
    cid = commands.create_conversation(SCOPE, {}).id
    stale_read(store, monkeypatch, cid)
    first, _ = commands.post_message(cid, "one", SCOPE)  # the read saw the log before this
    second, follow = commands.post_message(cid, "two", SCOPE)
    assert not first.queued and second.queued  # inv. 2: the lock's verdict, not the read's
    assert [e.content["text"] for e in store.log.list_events(cid)] == ["one"]
    assert [m.id for m in store.inbox.list_of(cid)] == [second.message_id]
    assert [f.conversation_id for f in follow] == [cid]


def test_a_post_read_while_a_turn_ran_that_ended_since_starts_the_next(
        store, runtime, commands, monkeypatch):
    cid = commands.create_conversation(SCOPE, {}).id
    _, follow = commands.post_message(cid, "one", SCOPE)
    stale_read(store, monkeypatch, cid)  # the turn runs
    drain(runtime, follow)  # and ends
    second, _ = commands.post_message(cid, "two", SCOPE)
    assert not second.queued and store.inbox.list_of(cid) == []
    assert [e.content["text"] for e in store.log.list_events(cid) if e.type == "user_msg"] == [
        "one", "two"]


def test_a_post_read_before_the_conversation_ended_is_refused(store, commands, monkeypatch):
    cid = commands.create_conversation(SCOPE, {}).id
    stale_read(store, monkeypatch, cid)
    commands.end(cid, SCOPE)
    with pytest.raises(Conflict, match="ended"):
        commands.post_message(cid, "late", SCOPE)
    assert store.log.list_events(cid) == [] and store.inbox.list_of(cid, taken=None) == []


def test_a_key_posted_again_after_the_read_answers_its_first_answer(store, commands, monkeypatch):
    cid = commands.create_conversation(SCOPE, {}).id
    stale_read(store, monkeypatch, cid, "k1")  # the key unused, the log empty
    first, _ = commands.post_message(cid, "hi", SCOPE, idempotency_key="k1")
    again, follow = commands.post_message(cid, "hi", SCOPE, idempotency_key="k1")
    assert again == first and follow == []  # inv. 5
    assert [e.content["text"] for e in store.log.list_events(cid)] == ["hi"]
    assert len(store.inbox.list_of(cid, taken=None)) == 1


def test_a_key_replayed_is_answered_from_the_read_and_a_changed_request_is_refused(
        store, commands):
    cid = commands.create_conversation(SCOPE, {}).id
    first, _ = commands.post_message(cid, "hi", SCOPE, idempotency_key="k1")
    with counted(store) as sent:
        again, follow = commands.post_message(cid, "hi", SCOPE, idempotency_key="k1")
    assert again == first and follow == [] and len(sent) == 1
    with pytest.raises(InvalidInput) as reused:
        commands.post_message(cid, "bye", SCOPE, idempotency_key="k1")
    assert reused.value.code == "idempotency_key_reused"
    assert [e.content["text"] for e in store.log.list_events(cid)] == ["hi"]


def test_a_message_posted_while_one_waits_in_an_idle_conversation_keeps_its_place(
        store, runtime, commands):
    cid = commands.create_conversation(SCOPE, {}).id
    _, follow1 = commands.post_message(cid, "one", SCOPE)
    _, follow2 = commands.post_message(cid, "two", SCOPE)
    later = runtime.advance(follow1[0].conversation_id)  # "one" ends its turn; "two" waits
    assert store.conversations.load(cid).fsm.state == "idle"
    third, follow3 = commands.post_message(cid, "three", SCOPE)
    assert third.queued
    drain(runtime, later + follow2 + follow3)
    users = [e.content["text"] for e in store.log.list_events(cid) if e.type == "user_msg"]
    assert users == ["one", "two", "three"]


@contextmanager
def counted(store: Store) -> Iterator[list[str]]:
    """What the store sends while the block runs, round trip by round trip: each statement,
    and the BEGIN and COMMIT of a transaction that is not in autocommit (SQLite's BEGINs,
    which it sends as statements, are left out)."""
    sent: list[str] = []

    def statement(_conn, _cursor, text, *_args) -> None:
        if text.split(None, 1)[0].upper() != "BEGIN":
            sent.append(text)

    def ends(name: str):
        def ended(conn) -> None:
            autocommit = getattr(conn.connection.driver_connection, "autocommit", False)
            if not autocommit and conn.dialect.name != "sqlite":
                sent.append(name)
        return ended

    begin, commit = ends("BEGIN"), ends("COMMIT")
    listeners = [("before_cursor_execute", statement), ("begin", begin), ("commit", commit)]
    for name, listener in listeners:
        event.listen(store.engine, name, listener)
    try:
        yield sent
    finally:
        for name, listener in listeners:
            event.remove(store.engine, name, listener)


@pytest.mark.postgres
@pytest.mark.parametrize("key", [None, "k1"])
def test_a_plain_post_is_two_round_trips_on_postgresql(pg_store_clean, monkeypatch, key):
    """Under the lock a message that starts a turn took six (seven with a key): BEGIN, the
    row locked, the inbox read (and the key's), the inbox row, the append, COMMIT; one that
    waits mid-turn took four (five): no inbox read, no append."""
    commands = pg_commands(pg_store_clean)
    cids = [commands.create_conversation(SCOPE, {}).id for _ in range(2)]
    for cid in cids:
        commands.post_message(cid, "busy", SCOPE)  # a turn starts: the next message waits
    sent = {}
    for path in ("unlocked", "locked"):
        if path == "locked":
            locked_only(commands, monkeypatch)
        fresh = commands.create_conversation(SCOPE, {}).id
        with counted(pg_store_clean) as sent[path, "turn"]:
            commands.post_message(fresh, "hi", SCOPE, idempotency_key=key)
        with counted(pg_store_clean) as sent[path, "queued"]:
            answer, _ = commands.post_message(cids.pop(), "hi", SCOPE, idempotency_key=key)
        assert answer.queued
    counts = {which: len(statements) for which, statements in sent.items()}
    more = key is not None
    assert counts == {("unlocked", "turn"): 2, ("unlocked", "queued"): 2,
                      ("locked", "turn"): 6 + more, ("locked", "queued"): 4 + more}, sent


def pg_commands(store: Store) -> Commands:
    return Commands(store, Registry.from_modules(["agentq.tools.demo"]))


def post_while_locked(store: Store, commands: Commands, cid: str,
                      write: Callable[[ConversationTxn], Any], message: str
                      ) -> tuple[MessageAnswer | Exception, int]:
    """Post `message` while another writer holds the conversation's lock and writes `write`:
    the post reads before that commits and waits for the lock to write. What it answered
    (or raised), and how often it went under the lock itself."""
    locked = store.writes.locked
    under_lock = []

    def counting(conversation_id: str):
        under_lock.append(conversation_id)
        return locked(conversation_id)

    answered: list[MessageAnswer | Exception] = []

    def post() -> None:
        try:
            answered.append(commands.post_message(cid, message, SCOPE)[0])
        except Exception as exc:  # what it raised is the answer to check
            answered.append(exc)

    poster = threading.Thread(target=post)
    with locked(cid) as tx:
        write(tx)
        store.writes.locked = counting  # type: ignore[method-assign]
        poster.start()
        waits_for_a_lock(store, poster)
    poster.join()
    store.writes.locked = locked  # type: ignore[method-assign]
    return answered[0], len(under_lock)


def waits_for_a_lock(store: Store, thread: threading.Thread) -> None:
    """Until a session of this database waits for a lock (or `thread` ended)."""
    waiting = text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                   "AND datname = current_database()")
    while thread.is_alive():
        with store.engine.connect() as conn:
            if conn.execute(waiting).scalar():
                return
        time.sleep(0.005)


def queued_by(tx: ConversationTxn, said: str, *, turn: bool) -> InboxItem:
    """A message posted under the lock: one that starts a turn, or one that waits."""
    item = InboxItem(id=str(uuid.uuid4()), conversation_id=tx.conversation.id,
                     content={"text": said}, on_busy="enqueue", created_at=T0,
                     scope=SCOPE.to_json())
    turn_id = str(uuid.uuid4())
    tx.add_inbox(item, queued=not turn, turn_id=turn_id, taken_at=T0 if turn else None)
    if turn:
        tx.append_and_fold([drafts.user_msg(said, turn_id=turn_id, message_id=item.id,
                                            scope=SCOPE.to_json(), created_at=T0)], now=T0)
    return item


def untaken(store: Store, cid: str) -> list[str]:
    return [item.content["text"] for item in store.inbox.list_of(cid)]


@pytest.mark.postgres
def test_a_post_that_waited_for_a_turn_started_meanwhile_queues_behind_it(pg_store_clean):
    commands = pg_commands(pg_store_clean)
    cid = commands.create_conversation(SCOPE, {}).id
    answer, under_lock = post_while_locked(
        pg_store_clean, commands, cid, lambda tx: queued_by(tx, "one", turn=True), "two")
    assert isinstance(answer, MessageAnswer) and answer.queued and under_lock == 1
    assert [e.content["text"] for e in pg_store_clean.log.list_events(cid)] == ["one"]
    assert untaken(pg_store_clean, cid) == ["two"]


@pytest.mark.postgres
def test_a_post_that_waited_for_the_conversation_to_end_is_refused(pg_store_clean):
    commands = pg_commands(pg_store_clean)
    cid = commands.create_conversation(SCOPE, {}).id
    answer, under_lock = post_while_locked(
        pg_store_clean, commands, cid, lambda tx: tx.set_status("ended", now=T0), "late")
    assert isinstance(answer, Conflict) and under_lock == 1
    assert pg_store_clean.log.list_events(cid) == []
    assert pg_store_clean.inbox.list_of(cid, taken=None) == []


@pytest.mark.postgres
def test_a_message_queued_while_another_was_queued_under_the_lock_waits_behind_it(
        pg_store_clean):
    """Its arrival number, read before the lock was free, is the other's: the inbox refuses
    it, and the lock numbers it again."""
    commands = pg_commands(pg_store_clean)
    cid = commands.create_conversation(SCOPE, {}).id
    commands.post_message(cid, "one", SCOPE)  # its turn runs
    answer, under_lock = post_while_locked(
        pg_store_clean, commands, cid, lambda tx: queued_by(tx, "two", turn=False), "three")
    assert isinstance(answer, MessageAnswer) and answer.queued and under_lock == 1
    assert untaken(pg_store_clean, cid) == ["two", "three"]


@pytest.mark.postgres
def test_a_message_that_waited_for_the_lock_while_its_turn_ended_starts_the_next(
        pg_store_clean):
    """Read mid-turn it would wait; the turn ended before the lock was free: its write,
    ordered after that end by the lock, finds the log moved, and the lock starts its turn."""
    commands = pg_commands(pg_store_clean)
    cid = commands.create_conversation(SCOPE, {}).id
    first, _ = commands.post_message(cid, "one", SCOPE)
    answer_ends_the_turn = drafts.assistant_msg("done", turn_id=first.turn_id, round_id="r1",
                                                step_key=None, created_at=T0)
    answer, under_lock = post_while_locked(
        pg_store_clean, commands, cid,
        lambda tx: tx.append_and_fold([answer_ends_the_turn], now=T0), "two")
    assert isinstance(answer, MessageAnswer) and not answer.queued and under_lock == 1
    assert [e.type for e in pg_store_clean.log.list_events(cid)] == [
        "user_msg", "assistant_msg", "user_msg"]
