"""The model-call audit (`AGENTQ_AUDIT=1`): exactly what was sent to a provider, and what it cost.

Rows are written after the call, outside the conversation's lock: they are a record for
people, never read by a step, and expire (`delete_model_calls_txn`) on a TTL.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, Row, delete, select

from agentq.store.dialects import Dialect
from agentq.store.engine import begin_read, begin_write
from agentq.store.schema import model_calls, record_from_row, record_values


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


def insert_model_call_txn(conn: Connection, record: ModelCallRecord) -> None:
    conn.execute(model_calls.insert().values(record_values(record)))


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
    return record_from_row(ModelCallRecord, row)


class Audit:
    """The audited model calls: written after each call, read by people, expired on a TTL."""

    def __init__(self, engine: Engine, dialect: Dialect) -> None:
        self._engine = engine
        self._dialect = dialect

    def record(self, record: ModelCallRecord) -> None:
        """Write one `model_calls` row: the request body exactly as sent, and its cost."""
        with begin_write(self._engine) as conn:
            insert_model_call_txn(conn, record)

    def list_of(self, conversation_id: str) -> list[ModelCallRecord]:
        """The conversation's audited model calls, oldest first."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return list_model_calls_txn(conn, conversation_id)

    def delete_before(self, before: datetime) -> int:
        """Delete audit rows older than `before` (their TTL); returns how many."""
        with begin_write(self._engine) as conn:
            return delete_model_calls_txn(conn, before=before)
