"""A conversation at a glance, read in one snapshot: what GET /v1/conversations/{id} shows.

One read transaction instead of four, and the inbox counted rather than loaded, so the
answer stays cheap when a long turn has many messages waiting.
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, Engine, func, select

from agentq.core.events import ToolCallRecord
from agentq.store.calls import list_calls_txn
from agentq.store.conversations import ConversationInfo, load_conversation_txn
from agentq.store.engine import begin_read
from agentq.store.schema import inbox, summaries


@dataclass(frozen=True)
class Overview:
    """The row, its pending calls, how many inbox messages wait, the latest summary's span."""

    conversation: ConversationInfo
    pending: list[ToolCallRecord]
    inbox: int
    summary: tuple[int, int] | None


def count_inbox_txn(conn: Connection, conversation_id: str) -> int:
    c = inbox.c
    query = select(func.count()).where(c.conversation_id == conversation_id, c.taken_at.is_(None))
    return conn.execute(query).scalar_one()


def latest_summary_span_txn(conn: Connection, conversation_id: str) -> tuple[int, int] | None:
    c = summaries.c
    row = conn.execute(
        select(c.from_seq, c.to_seq).where(c.conversation_id == conversation_id)
        .order_by(c.to_seq.desc()).limit(1)
    ).first()
    return None if row is None else (row.from_seq, row.to_seq)


class Overviews:
    """The overview verb of `Store`."""

    engine: Engine

    def load_overview(self, conversation_id: str, *, tenant: str | None = None) -> Overview | None:
        """The overview, or None if absent or owned by another `tenant`."""
        with begin_read(self.engine) as conn:
            info = load_conversation_txn(conn, conversation_id)
            if info is None or (tenant is not None and info.tenant != tenant):
                return None
            return Overview(
                conversation=info,
                pending=list_calls_txn(conn, conversation_id, statuses=("pending",)),
                inbox=count_inbox_txn(conn, conversation_id),
                summary=latest_summary_span_txn(conn, conversation_id),
            )
