"""A posted message's common cases without the conversation's lock: one read, one guarded write.

Under the lock (`Writes.locked`) a post costs BEGIN, `SELECT … FOR NO KEY UPDATE`, the inbox
reads the message rules need, the inbox INSERT, the append, COMMIT. Here `read_posting_txn`
reads all the rules need in one statement (the row, whether a message waits, the first
answer to the idempotency key), and a verdict that closes no turn is written guarded on
what it rests on: the log still ends where it was read (`next_seq` N) and the conversation
is still active, both rechecked by the row's lock on its newest version (on SQLite,
BEGIN IMMEDIATE holds the database while the guard is read). `start_turn_txn`
writes a message that starts a turn (its inbox row, taken, its `user_msg`, the row's
move); `queue_txn` a message that waits in the inbox. On PostgreSQL each is one statement
in autocommit; on SQLite, a transaction. A guard that refused, or a unique key of the inbox
found taken, wrote nothing, and the caller decides again under the lock.

Why that is enough (inv. 2, 5, 8). Every write that changes the cached state or the settings
moves `next_seq` (`MOVE_NEXT_SEQ` is the only UPDATE of `fsm_state`), ending a conversation
changes `status`, and taking a waiting message appends its `user_msg`: so while the guard
holds, the state, the status and the messages that wait are what the read saw, but for
messages queued since. Then:

- a message that starts a turn (`Append` that closes none: idle or failed with nothing
  open, none waiting, the key unused): no message can have been queued since, for a post
  queues only while a turn is busy (not so at N) or, in an idle conversation, behind a
  message that waits; none waited when read, and each one queued since would need one
  waiting before it. A post of the same key that committed meanwhile appended (it found
  what we found), so it moved the log; one not yet committed holds the row, and its guard
  or its lock sees ours. So the inbox, its `arrival` numbers and its keys are as read;
- a message that waits (`Queue`: a turn busy, or a message waiting in an idle conversation):
  messages queued since do not change that verdict, only its place and its key. The
  arrival number is read in the statement's snapshot, but numbers are dense (each the
  largest + 1, under the lock or under this guard), so a message queued after that
  snapshot holds the number this one would take, and the inbox's unique index refuses it;
  its (conversation, key) index refuses a key queued meanwhile. The lock orders the
  insert with the move that ends a busy turn: before it, the turn's last commit reads that
  a message waits (`whole_commit`); after it, the guard refuses.

A message that closes a turn (an interrupt, or a failed turn with calls open) goes under
the lock.
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
from agentq.store.inbox import MESSAGE_WAITS, NEXT_ARRIVAL, inbox_values
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
    or None, nothing written, if the log moved or the conversation ended. A unique key of
    the inbox taken raises IntegrityError.

    A `user_msg` makes no occurrence (agentq.core.occurrences) and ends no turn, so there is
    no outbox row and no hand-over to write with it."""
    assert message.type == "user_msg" and message.turn_id is not None
    params = move_params(item.conversation_id, old_seq=message.seq, new_seq=message.seq + 1,
                         fsm=fsm, now=now)
    if dialects.of(conn).one_statement_commit:
        params.update(row_parameters("e", [event_values(message)]))
        params.update(_item_params(item, queued=False, turn_id=message.turn_id, taken_at=now))
        row = conn.execute(_start_turn(), params).first()
        return None if row is None else conversation_from_row(row)
    row = conn.execute(_MOVE_ACTIVE, params).first()
    if row is None:
        return None
    conn.execute(events.insert(), [event_values(message)])
    conn.execute(inbox.insert().values(
        **inbox_values(item, queued=False, turn_id=message.turn_id, taken_at=now)))
    return conversation_from_row(row)


def queue_txn(conn: Connection, item: InboxItem, *, turn_id: str, next_seq: int) -> bool:
    """Queue the message `item` (the turn it will start named `turn_id`), if the log still
    ends before `next_seq` and the conversation is active: whether it was queued. A unique
    key of the inbox taken raises IntegrityError."""
    params = {"cid": item.conversation_id, "old_seq": next_seq}
    if dialects.of(conn).one_statement_commit:
        params.update(_item_params(item, queued=True, turn_id=turn_id, taken_at=None))
        return conn.execute(_queue(), params).first() is not None
    if conn.execute(_STILL, params).first() is None:  # BEGIN IMMEDIATE holds the database
        return False
    conn.execute(inbox.insert().values(
        **inbox_values(item, queued=True, turn_id=turn_id, taken_at=None)))
    return True


# the row moved on from :old_seq, if the conversation is still active
_MOVE_ACTIVE = MOVE_NEXT_SEQ.where(conversations.c.status == literal_column("'active'"))
# the row, if the log still ends before :old_seq and the conversation is active
_STILL = select(conversations.c.id).where(
    conversations.c.id == param(conversations.c.id, "cid"),
    conversations.c.next_seq == param(conversations.c.next_seq, "old_seq"),
    conversations.c.status == literal_column("'active'"),
)
# the inbox's columns a statement sets from parameters `m0_<name>` (it numbers `arrival`)
_ITEM_COLUMNS = [column.name for column in inbox.c if column.name != "arrival"]


def _item_params(item: InboxItem, *, queued: bool, turn_id: str | None,
                 taken_at: datetime | None) -> dict[str, Any]:
    values = inbox_values(item, queued=queued, turn_id=turn_id, taken_at=taken_at)
    return row_parameters("m", [{name: values[name] for name in _ITEM_COLUMNS}])


def _adding_item(guard: Any, name: str) -> Any:
    """The INSERT of the inbox row (parameters `m0_<column>`, the next arrival number read
    in the statement's snapshot), only if the CTE `guard` found its row: a CTE."""
    row = select(*(param(inbox.c[column], f"m0_{column}").label(column)
                   for column in _ITEM_COLUMNS),
                 NEXT_ARRIVAL.scalar_subquery().label("arrival"))
    row = row.where(select(guard.c.id).exists())
    return (insert(inbox).from_select([*_ITEM_COLUMNS, "arrival"], row)
            .returning(inbox.c.id).cte(name))


@cache
def _start_turn() -> Select[Any]:
    """The row's move, the event's INSERT and the inbox row's, in one statement; both
    INSERTs read the move's RETURNING, so they land only if it did."""
    moved = _MOVE_ACTIVE.cte("moved")
    return select(moved).add_cte(inserting_after(moved, 1), _adding_item(moved, "taken"))


@cache
def _queue() -> Select[Any]:
    """The inbox row's INSERT under a guard that locks the conversation's row (FOR NO KEY
    UPDATE, as `Writes.locked` does), rechecking its newest version: one statement."""
    still = _STILL.with_for_update(key_share=True).cte("still")
    queued = _adding_item(still, "queued")
    return select(queued.c.id)
