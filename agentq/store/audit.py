"""The model-call audit (`AGENTQ_AUDIT=1`): exactly what was sent to a provider, and what it cost.

Rows are written after the call, outside the conversation's lock: they are a record for
people, never read by a step, and expire (`delete_model_calls_txn`) on a TTL.
"""
from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, delete, select

from agentq.store.schema import model_calls


@dataclass(frozen=True)
class ModelCallRecord:
    """One audited model call; `rendered_context` is the request body as it went over the wire."""

    id: str
    conversation_id: str
    step_key: str | None
    rendered_context: dict[str, Any] | None
    model: str | None
    usage: dict[str, Any] | None
    latency_ms: int | None
    summary_version: int | None
    evictions: list[Any] | None
    created_at: datetime


def record_model_call_txn(
    conn: Connection,
    *,
    conversation_id: str,
    step_key: str | None,
    sent: dict[str, Any] | None,
    model: str | None,
    usage: dict[str, Any] | None,
    latency_ms: int | None,
    summary_version: int | None,
    evictions: Sequence[Any] | None,
    now: datetime,
) -> str:
    """Insert one audit row; returns its id."""
    row_id = str(uuid.uuid4())
    conn.execute(model_calls.insert().values(
        id=row_id,
        conversation_id=conversation_id,
        step_key=step_key,
        rendered_context=sent,
        model=model,
        usage=usage,
        latency_ms=latency_ms,
        summary_version=summary_version,
        evictions=list(evictions) if evictions is not None else None,
        created_at=now,
    ))
    return row_id


def list_model_calls_txn(conn: Connection, conversation_id: str) -> list[ModelCallRecord]:
    query = (
        select(model_calls)
        .where(model_calls.c.conversation_id == conversation_id)
        .order_by(model_calls.c.created_at, model_calls.c.id)
    )
    return [_record_from_row(row) for row in conn.execute(query)]


def delete_model_calls_txn(conn: Connection, *, before: datetime) -> int:
    """Delete audit rows created before `before`; returns how many."""
    result = conn.execute(delete(model_calls).where(model_calls.c.created_at < before))
    return result.rowcount


def _record_from_row(row: Row[Any]) -> ModelCallRecord:
    return ModelCallRecord(
        id=row.id,
        conversation_id=row.conversation_id,
        step_key=row.step_key,
        rendered_context=row.rendered_context,
        model=row.model,
        usage=row.usage,
        latency_ms=row.latency_ms,
        summary_version=row.summary_version,
        evictions=row.evictions,
        created_at=row.created_at,
    )
