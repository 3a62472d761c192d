"""Forking: a new conversation that holds a copy of another's log up to a turn boundary.

The copy keeps seq, turn and round ids (they name the same history), gets new event
ids, and takes the summaries and tool-call rows that lie wholly inside the copied span.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import replace
from datetime import datetime

from sqlalchemy import Connection, select

from agentq.core.events import Event, EventDraft, FsmState
from agentq.core.fsm import fold
from agentq.core.settings import parse_settings
from agentq.errors import NotFound
from agentq.store.calls import call_from_row, put_calls_txn
from agentq.store.conversations import (
    ConversationInfo,
    insert_conversation_txn,
    load_conversation_txn,
)
from agentq.store.eventlog import append_txn, save_summary_txn
from agentq.store.schema import conversations, tool_calls
from agentq.store.views import list_events_txn, list_summaries_txn


def fork_conversation_txn(
    conn: Connection, source_id: str, *, at_seq: int, now: datetime
) -> ConversationInfo:
    source = load_conversation_txn(conn, source_id, lock=False)
    if source is None:
        raise NotFound(f"conversation {source_id} not found")
    copied = list_events_txn(conn, source_id, after_seq=0, limit=None, before_seq=at_seq + 1)
    # its own settings, not those of an agent a handoff gave it to: the copied log says
    # which agent holds the fork (agentq.core.handoffs)
    own = conn.execute(select(conversations.c.settings)  # its text (column_types.JsonText)
                       .where(conversations.c.id == source_id)).scalar_one()
    fork = ConversationInfo(
        id=str(uuid.uuid4()), tenant=source.tenant, settings=parse_settings(json.loads(own)),
        fsm=FsmState(), status="active", next_seq=1, created_at=now, updated_at=now,
        agent=source.agent,
    )
    insert_conversation_txn(conn, fork)
    drafts = [_as_draft(event) for event in copied]
    _, fork = append_txn(conn, fork, drafts, state_after=fold, now=now, outbox=False)
    call_ids = [e.content["tool_call_id"] for e in copied if e.type == "tool_call"]
    if call_ids:
        rows = conn.execute(
            select(tool_calls).where(
                tool_calls.c.conversation_id == source_id, tool_calls.c.id.in_(call_ids)
            )
        )
        put_calls_txn(conn, [replace(call_from_row(row), conversation_id=fork.id) for row in rows])
    for summary in list_summaries_txn(conn, source_id):
        if summary.to_seq <= at_seq:
            save_summary_txn(
                conn, conversation_id=fork.id, from_seq=summary.from_seq, to_seq=summary.to_seq,
                content=summary.content, version=summary.version, now=summary.created_at,
            )
    return fork


def _as_draft(event: Event) -> EventDraft:
    return EventDraft(
        type=event.type, content=event.content, created_at=event.created_at,
        turn_id=event.turn_id, round_id=event.round_id, step_key=event.step_key,
    )
