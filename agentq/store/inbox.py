"""The inbox: user messages that arrived mid-turn, and the idempotency keys of all messages."""
from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Connection, Row, Select, select, update
from sqlalchemy.exc import IntegrityError

from agentq.core.events import InboxItem
from agentq.errors import Conflict
from agentq.store.engine import param
from agentq.store.schema import inbox, record_from_row


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
    values = {
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
    }
    try:
        conn.execute(inbox.insert().values(**values))
    except IntegrityError as exc:
        raise Conflict(f"inbox item {item.id} or its idempotency key exists already") from exc


def find_inbox_by_key_txn(
    conn: Connection, conversation_id: str, idempotency_key: str
) -> dict[str, Any] | None:
    c = inbox.c
    row = conn.execute(
        select(c.id, c.turn_id, c.queued)
        .where(c.conversation_id == conversation_id, c.idempotency_key == idempotency_key)
        .order_by(c.created_at, c.id)
        .limit(1)
    ).first()
    if row is None:
        return None
    return {"message_id": row.id, "turn_id": row.turn_id, "queued": row.queued}


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
        .order_by(c.created_at, c.id)
    )
    if taken is not None:
        query = query.where(c.taken_at.is_not(None) if taken else c.taken_at.is_(None))
    return query


def inbox_waiting_txn(conn: Connection, conversation_id: str) -> bool:
    """Whether a message waits in the inbox (one indexed probe, no rows loaded)."""
    return bool(conn.execute(_WAITING, {"cid": conversation_id}).scalar())


_WAITING = select(
    select(inbox.c.id)
    .where(inbox.c.conversation_id == param(inbox.c.conversation_id, "cid"), inbox.c.taken_at.is_(None))
    .exists()
)
