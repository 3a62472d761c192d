"""Read-only overviews: a conversation at a glance, and a tenant's calls across conversations.

The first is what GET /v1/conversations/{id} shows: one statement (one round trip, one
snapshot) instead of a transaction of four, and the inbox counted rather than loaded, so
the answer stays cheap when a long turn has many messages waiting, and quick on a busy
API process, where each round trip waits its turn among thousands of streams. The second
is what GET /v1/tool-calls shows: every call waiting on a person, whichever conversation
it is in, a page at a time.
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, Engine, and_, func, or_, select

from agentq.core.events import Event, ToolCallRecord
from agentq.store.calls import call_from_row
from agentq.store.conversations import ConversationInfo, conversation_from_row
from agentq.store.dialects import Dialect
from agentq.store.engine import begin_read, param
from agentq.store.eventlog import event_from_row
from agentq.store.schema import conversations, events, inbox, summaries, tool_calls


@dataclass(frozen=True)
class Overview:
    """The row, its pending calls, how many inbox messages wait, the latest summary's span."""

    conversation: ConversationInfo
    pending: list[ToolCallRecord]
    inbox: int
    summary: tuple[int, int] | None


def load_overview_txn(conn: Connection, conversation_id: str) -> Overview | None:
    """The overview from one statement: the row joined to its pending calls (one row per
    call, or one without), the inbox count and the latest summary's span beside it."""
    rows = conn.execute(_OVERVIEW, {"conversation_id": conversation_id}).all()
    if not rows:
        return None
    first = rows[0]
    to_seq = first.overview_to_seq
    return Overview(
        conversation=conversation_from_row(first),
        pending=[call_from_row(r, _CALL) for r in rows if r._mapping[f"{_CALL}id"] is not None],
        inbox=first.overview_inbox,
        summary=None if to_seq is None else (first.overview_from_seq, to_seq),
    )


def _overview_query():
    conv, call, waiting, summary = conversations.c, tool_calls.c, inbox.c, summaries.c
    latest = (select(summary.from_seq).where(summary.conversation_id == conv.id)
              .order_by(summary.to_seq.desc()).limit(1).scalar_subquery())
    pending = and_(call.conversation_id == conv.id, call.status == "pending")
    waiting_now = and_(waiting.conversation_id == conv.id, waiting.taken_at.is_(None))
    return (
        select(
            conversations,
            select(func.count()).where(waiting_now).scalar_subquery().label("overview_inbox"),
            latest.label("overview_from_seq"),
            select(func.max(summary.to_seq)).where(summary.conversation_id == conv.id)
            .scalar_subquery().label("overview_to_seq"),
            *[column.label(f"{_CALL}{column.name}") for column in tool_calls.c],
        )
        .select_from(conversations.outerjoin(tool_calls, pending))
        .where(conv.id == param(conv.id, "conversation_id"))
        .order_by(call.created_at, call.id)
    )


_CALL = "pending_call_"
_OVERVIEW = _overview_query()  # built once, like the statements a step runs


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

    def __init__(self, engine: Engine, dialect: Dialect) -> None:
        self._engine = engine
        self._dialect = dialect

    def load(self, conversation_id: str, *, tenant: str | None = None) -> Overview | None:
        """The overview, or None if absent or owned by another `tenant`."""
        with begin_read(self._engine, one_snapshot=False) as conn:  # one statement: one snapshot
            found = load_overview_txn(conn, conversation_id)
        if found is None or (tenant is not None and found.conversation.tenant != tenant):
            return None
        return found

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
        with begin_read(self._engine) as conn:
            return list_tenant_calls_txn(
                conn, tenant=tenant, status=status, executor=executor, after=after, limit=limit
            )

    def list_first_messages(self, conversation_ids: list[str]) -> dict[str, str]:
        """Each conversation's first user message (seq 1, where every log starts): its title."""
        if not conversation_ids:
            return {}
        e = events.c
        with begin_read(self._engine, one_snapshot=False) as conn:
            rows = conn.execute(select(e.conversation_id, e.content).where(
                e.conversation_id.in_(conversation_ids), e.seq == 1, e.type == "user_msg"))
            return {cid: (content or {}).get("text") or "" for cid, content in rows}

    def list_events_of_turn(self, conversation_id: str, turn_id: str) -> list[Event]:
        """The events of one turn, in seq order."""
        e = events.c
        with begin_read(self._engine, one_snapshot=False) as conn:
            rows = conn.execute(select(events).where(e.conversation_id == conversation_id,
                                                     e.turn_id == turn_id).order_by(e.seq))
            return [event_from_row(row) for row in rows]
