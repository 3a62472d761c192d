"""post_message without the conversation's lock (agentq.store.posting): a message that starts
a turn is written as under the lock, a log that moved since the read is decided again under
the lock, and a plain post costs two statements on PostgreSQL where it cost six round trips."""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

import pytest
from sqlalchemy import event, select

from agentq.commands import Commands
from agentq.errors import Conflict, InvalidInput
from agentq.store import Store
from agentq.store.schema import inbox
from agentq.tools import Registry
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
    for text, key in (("one", "k1"), ("two", None), ("one", "k1")):
        answer, follow = commands.post_message(cid, text, SCOPE, idempotency_key=key,
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
            autocommit = conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT"
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
    """Under the lock it was six (seven with a key): BEGIN, the row locked, the inbox read
    (and the key's), the inbox row, the append, COMMIT."""
    commands = Commands(pg_store_clean, Registry.from_modules(["agentq.tools.demo"]))
    cid = commands.create_conversation(SCOPE, {}).id
    with counted(pg_store_clean) as sent:
        commands.post_message(cid, "hi", SCOPE, idempotency_key=key)
    assert len(sent) == 2, sent
    locked_only(commands, monkeypatch)
    other = commands.create_conversation(SCOPE, {}).id
    with counted(pg_store_clean) as sent:
        commands.post_message(other, "hi", SCOPE, idempotency_key=key)
    assert len(sent) == (6 if key is None else 7), sent
