"""Read-only overviews: a conversation at a glance, and a tenant's calls across conversations.

The first is what GET /v1/conversations/{id} shows: one read transaction instead of four,
and the inbox counted rather than loaded, so the answer stays cheap when a long turn has
many messages waiting. The second is what GET /v1/tool-calls shows: every call waiting
on a person, whichever conversation it is in, a page at a time.
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, Engine, and_, func, or_, select

from agentq.core.events import ToolCallRecord
from agentq.store.calls import call_from_row, list_calls_txn
from agentq.store.conversations import ConversationInfo, load_conversation_txn
from agentq.store.engine import begin_read
from agentq.store.schema import conversations, inbox, summaries, tool_calls


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


def list_tenant_calls_txn(
    conn: Connection,
    *,
    tenant: str,
    status: str | None,
    executor: str | None,
    after: tuple[str, str] | None,
    limit: int,
) -> list[ToolCallRecord]:
    """Calls of `tenant`'s conversations by (created_at, conversation_id, id), after the call
    `after` = (conversation_id, call_id); a cursor naming no call of the tenant ends the list."""
    c = tool_calls.c
    owned = select(conversations.c.id).where(conversations.c.tenant == tenant)
    query = (
        select(tool_calls)
        .where(c.conversation_id.in_(owned))
        .order_by(c.created_at, c.conversation_id, c.id)
        .limit(limit)
    )
    if status is not None:
        query = query.where(c.status == status)
    if executor is not None:
        query = query.where(c.executor == executor)
    if after is not None:
        cid, call_id = after
        at = (
            select(c.created_at)
            .where(c.conversation_id == cid, c.id == call_id, c.conversation_id.in_(owned))
            .scalar_subquery()
        )
        query = query.where(or_(
            c.created_at > at,
            and_(c.created_at == at, or_(
                c.conversation_id > cid, and_(c.conversation_id == cid, c.id > call_id),
            )),
        ))
    return [call_from_row(row) for row in conn.execute(query)]


class Overviews:
    """The overview verbs of `Store`."""

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

    def list_tenant_calls(
        self,
        *,
        tenant: str,
        status: str | None = None,
        executor: str | None = None,
        after: tuple[str, str] | None = None,
        limit: int = 50,
    ) -> list[ToolCallRecord]:
        """`tenant`'s tool calls across its conversations, oldest first, the page after `after`."""
        with begin_read(self.engine) as conn:
            return list_tenant_calls_txn(
                conn, tenant=tenant, status=status, executor=executor, after=after, limit=limit
            )

