"""The inbox: user messages that arrived mid-turn, and the idempotency keys of all messages.

Every message gets the next `arrival` number of its conversation (under the conversation's
lock), and the inbox is drained in that order: a client's `created_at` is only recorded.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Connection, Engine, Row, Select, func, select, update
from sqlalchemy.exc import IntegrityError

from agentq.core.events import InboxItem
from agentq.errors import Conflict
from agentq.store.dialects import Dialect
from agentq.store.engine import begin_read, param
from agentq.store.schema import events, inbox, record_from_row


def inbox_from_row(row: Row[Any]) -> InboxItem:
    return record_from_row(InboxItem, row)


def add_inbox_txn(
    conn: Connection,
    item: InboxItem,
    *,
    queued: bool,
    turn_id: str | None,
    taken_at: datetime | None,
) -> None:
    values = inbox_values(item, queued=queued, turn_id=turn_id, taken_at=taken_at)
    try:
        conn.execute(inbox.insert().values(**values))
    except IntegrityError as exc:
        raise Conflict(f"inbox item {item.id} or its idempotency key exists already") from exc


def inbox_values(
    item: InboxItem, *, queued: bool, turn_id: str | None, taken_at: datetime | None
) -> dict[str, Any]:
    """The columns of the item's inbox row; `arrival` is the next number, read as it is
    inserted."""
    return {
        "id": item.id,
        "conversation_id": item.conversation_id,
        "idempotency_key": item.idempotency_key,
        "content": item.content,
        "on_busy": item.on_busy,
        "scope": item.scope,
        "queued": queued,
        "turn_id": turn_id,
        "created_at": item.created_at,
        "taken_at": taken_at,
        "request_hash": item.request_hash,
        "arrival": NEXT_ARRIVAL.params(cid=item.conversation_id).scalar_subquery(),
    }


# inv. 8 holds the conversation's lock, so no other message takes the same number (or, for a
# message that starts a turn, a guard: agentq.store.posting).
NEXT_ARRIVAL = (
    select(func.coalesce(func.max(inbox.c.arrival), 0) + 1)
    .where(inbox.c.conversation_id == param(inbox.c.conversation_id, "cid"))
)


def find_inbox_by_key_txn(
    conn: Connection, conversation_id: str, idempotency_key: str
) -> dict[str, Any] | None:
    """{"message_id", "turn_id", "queued", "request_hash"} of the message with that key."""
    c = inbox.c
    row = conn.execute(
        select(c.id, c.turn_id, c.queued, c.request_hash)
        .where(c.conversation_id == conversation_id, c.idempotency_key == idempotency_key)
    ).first()
    if row is None:
        return None
    return {"message_id": row.id, "turn_id": row.turn_id, "queued": row.queued,
            "request_hash": row.request_hash}


def take_inbox_txn(
    conn: Connection, conversation_id: str, item_id: str, *, turn_id: str, now: datetime
) -> bool:
    """Take an item once: only while `taken_at` is still NULL."""
    c = inbox.c
    result = conn.execute(
        update(inbox)
        .where(c.conversation_id == conversation_id, c.id == item_id, c.taken_at.is_(None))
        .values(taken_at=now, turn_id=turn_id)
    )
    return result.rowcount == 1


def list_inbox_txn(
    conn: Connection, conversation_id: str, *, taken: bool | None
) -> list[InboxItem]:
    query = _inbox_list(taken)
    return [inbox_from_row(row) for row in conn.execute(query, {"cid": conversation_id})]


@cache
def _inbox_list(taken: bool | None) -> Select[Any]:
    c = inbox.c
    query = (
        select(inbox)
        .where(c.conversation_id == param(c.conversation_id, "cid"))
        .order_by(c.arrival)
    )
    if taken is not None:
        query = query.where(c.taken_at.is_not(None) if taken else c.taken_at.is_(None))
    return query


def inbox_waiting_txn(conn: Connection, conversation_id: str) -> bool:
    """Whether a message waits in the inbox (one indexed probe, no rows loaded)."""
    return bool(conn.execute(_WAITING, {"cid": conversation_id}).scalar())


# a message of conversation :cid waits (also a part of `step_commit`'s statements)
MESSAGE_WAITS = (
    select(inbox.c.id)
    .where(inbox.c.conversation_id == param(inbox.c.conversation_id, "cid"), inbox.c.taken_at.is_(None))
    .exists()
)
_WAITING = select(MESSAGE_WAITS)


@dataclass(frozen=True)
class TurnStart:
    """Where a turn starts: the seq of its user_msg, None while its message waits."""

    seq: int | None


def find_turn_txn(conn: Connection, conversation_id: str, turn_id: str) -> TurnStart | None:
    """Where the turn starts; None if the conversation has no such turn.

    A turn is named when its message arrives (its inbox row), and starts with a user_msg
    of that turn; a forked conversation has the user_msgs without their inbox rows.
    """
    start = conn.execute(
        select(func.min(events.c.seq))
        .where(events.c.conversation_id == conversation_id, events.c.turn_id == turn_id,
               events.c.type == "user_msg")
    ).scalar()
    if start is not None:
        return TurnStart(int(start))
    named = conn.execute(
        select(inbox.c.id).where(inbox.c.conversation_id == conversation_id,
                                 inbox.c.turn_id == turn_id).limit(1)
    ).first()
    return TurnStart(None) if named is not None else None


class Inbox:
    """The inbox of conversations, and where each turn starts."""

    def __init__(self, engine: Engine, dialect: Dialect) -> None:
        self._engine = engine
        self._dialect = dialect

    def list_of(self, conversation_id: str, *, taken: bool | None = False) -> list[InboxItem]:
        """Inbox items by (created_at, id): untaken by default, taken, or all (None)."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return list_inbox_txn(conn, conversation_id, taken=taken)

    def find_turn(self, conversation_id: str, turn_id: str) -> TurnStart | None:
        """Where the turn starts (its user_msg's seq, or None while it waits); None: no such turn."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return find_turn_txn(conn, conversation_id, turn_id)
