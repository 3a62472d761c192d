"""A posted message's common case without the conversation's lock: one read, one guarded write.

Under the lock (`Writes.locked`) a post costs BEGIN, `SELECT … FOR NO KEY UPDATE`, the inbox
reads the message rules need, the inbox INSERT, the append, COMMIT. Most posts start a turn
in an idle conversation, so `read_posting_txn` reads all the rules need in one statement (the
row, whether a message waits, the first answer to the idempotency key) and
`start_turn_txn` writes a message that starts a turn (its inbox row, taken, and its
`user_msg`) guarded on what that verdict rests on: the log still ends where it was read and
the conversation is still active. On PostgreSQL the write is one statement in autocommit;
on SQLite, a transaction. A guard that refused wrote nothing, and the caller decides again
under the lock.

Why the guard is enough (inv. 2, 5, 8), for a verdict of a plain append (`Append` that closes
no turn: the conversation idle or failed with nothing open, no message waiting, the key
unused), read in one snapshot where the log ended before `next_seq` N:

- every write that changes the cached state or settings moves `next_seq` (`MOVE_NEXT_SEQ`
  is the only UPDATE of `fsm_state`), and ending a conversation changes `status`: both are
  in the guard, which the row's lock rechecks on its newest version;
- no message can be queued while the log still ends before N: a post queues only while a
  turn is busy (not so at N) or, in an idle conversation, behind a message that waits; none
  waited when read, and each one queued since would need one waiting before it. So the
  inbox, its `arrival` numbers and its keys are what the read saw, unless the log moved;
- a post of the same key that committed meanwhile appended (it found what we found), so it
  moved the log; one that has not committed yet holds the row, and its guard or lock sees
  ours, and answers with a replay.

A message that would queue, or close a turn, goes under the lock.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Connection, Select, insert, literal_column, select

from agentq.core.events import Event, FsmState, InboxItem
from agentq.store import dialects
from agentq.store.conversations import (
    MOVE_NEXT_SEQ,
    ConversationInfo,
    conversation_from_row,
    move_params,
)
from agentq.store.engine import param, row_parameters
from agentq.store.eventlog import event_values, inserting_after
from agentq.store.inbox import MESSAGE_WAITS, NEXT_ARRIVAL, add_inbox_txn, inbox_values
from agentq.store.schema import conversations, events, inbox


@dataclass(frozen=True)
class Posting:
    """What the message rules read, in one snapshot: the row, whether a message waits in the
    inbox, and the first answer to the request's idempotency key (as `find_inbox_by_key_txn`
    gives it), if any."""

    conversation: ConversationInfo
    inbox_waiting: bool
    replayed: dict[str, Any] | None


def read_posting_txn(conn: Connection, conversation_id: str,
                     idempotency_key: str | None) -> Posting | None:
    """What a post reads, in one statement; None if there is no such conversation."""
    row = conn.execute(_READ, {"cid": conversation_id, "key": idempotency_key}).first()
    if row is None:
        return None
    replayed = None if row.replayed_id is None else {
        "message_id": row.replayed_id, "turn_id": row.replayed_turn_id,
        "queued": row.replayed_queued, "request_hash": row.replayed_hash}
    return Posting(conversation_from_row(row), bool(row.inbox_waiting), replayed)


def _read() -> Select[Any]:
    c = conversations.c
    key = inbox.alias("keyed")  # no key (NULL) matches no row
    return (
        select(conversations, MESSAGE_WAITS.label("inbox_waiting"),
               key.c.id.label("replayed_id"), key.c.turn_id.label("replayed_turn_id"),
               key.c.queued.label("replayed_queued"), key.c.request_hash.label("replayed_hash"))
        .select_from(conversations.outerjoin(key, (key.c.conversation_id == c.id)
                                             & (key.c.idempotency_key
                                                == param(inbox.c.idempotency_key, "key"))))
        .where(c.id == param(c.id, "cid"))
    )


_READ = _read()


def start_turn_txn(
    conn: Connection, item: InboxItem, message: Event, *, fsm: FsmState, now: datetime,
) -> ConversationInfo | None:
    """Write the message `item` that starts a turn, taken now, and its `user_msg` `message`
    (at the seq where the log ended when read), leaving the state `fsm`: the row as moved,
    or None, nothing written, if the log moved or the conversation ended.

    A `user_msg` makes no occurrence (agentq.core.occurrences) and ends no turn, so there is
    no outbox row and no hand-over to write with it."""
    assert message.type == "user_msg" and message.turn_id is not None
    params = move_params(item.conversation_id, old_seq=message.seq, new_seq=message.seq + 1,
                         fsm=fsm, now=now)
    if dialects.of(conn).one_statement_commit:
        params.update(row_parameters("e", [event_values(message)]))
        params.update(row_parameters("m", [_taken_values(item, message, now)]))
        row = conn.execute(_start_turn(), params).first()
        return None if row is None else conversation_from_row(row)
    row = conn.execute(_MOVE_ACTIVE, params).first()
    if row is None:
        return None
    conn.execute(events.insert(), [event_values(message)])
    add_inbox_txn(conn, item, queued=False, turn_id=message.turn_id, taken_at=now)
    return conversation_from_row(row)


# the row moved on from :old_seq, if the conversation is still active
_MOVE_ACTIVE = MOVE_NEXT_SEQ.where(conversations.c.status == literal_column("'active'"))


def _taken_values(item: InboxItem, message: Event, now: datetime) -> dict[str, Any]:
    values = inbox_values(item, queued=False, turn_id=message.turn_id, taken_at=now)
    del values["arrival"]  # the statement numbers it
    return values


@cache
def _start_turn() -> Select[Any]:
    """The row's move, the event's INSERT and the inbox row's, in one statement; both
    INSERTs read the move's RETURNING, so they land only if it did. The arrival number is
    read in the statement's snapshot: while the guard holds, no message was added since
    (the module's docstring)."""
    moved = _MOVE_ACTIVE.cte("moved")
    names = [column.name for column in inbox.c if column.name != "arrival"]
    taken = select(*(param(inbox.c[name], f"m0_{name}").label(name) for name in names),
                   NEXT_ARRIVAL.scalar_subquery().label("arrival"))
    taken = taken.where(select(moved.c.id).exists())
    adding = insert(inbox).from_select([*names, "arrival"], taken).cte("taken")
    return select(moved).add_cte(inserting_after(moved, 1), adding)
