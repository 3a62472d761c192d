"""The log and what is derived from it: events, summaries, and the view a step loads."""
from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import (
    Connection,
    Row,
    Select,
    insert,
    select,
)

from agentq.core.decide import Step
from agentq.core.events import Event, EventDraft, FsmState
from agentq.core.fsm import fold
from agentq.core.keys import task_id
from agentq.core.occurrences import occurrences
from agentq.errors import Conflict
from agentq.store import dialects
from agentq.store.conversations import (
    MOVE_NEXT_SEQ,
    ConversationInfo,
    conversation_from_row,
    move_next_seq_txn,
    move_params,
    parent_values,
)
from agentq.store.engine import insert_ignoring, parameter_rows, row_parameters
from agentq.store.ledger import NewStep, schedule_step_txn
from agentq.store.outbox import endpoints_of, record_outbox_txn
from agentq.store.schema import conversations, events, record_from_row, summaries


def event_from_row(row: Row[Any]) -> Event:
    return record_from_row(Event, row)


def append_txn(
    conn: Connection,
    info: ConversationInfo,
    drafts: Sequence[EventDraft],
    *,
    state_after: Callable[[list[Event]], FsmState] | None = None,
    now: datetime | None = None,
    outbox: bool = True,
) -> tuple[list[Event], ConversationInfo]:
    """Insert drafts as events; `info` is the row as read under the lock, returned moved on.

    `state_after(events)` gives the cached state to store with them, in one UPDATE.
    Without `outbox` (a fork copying a log), no webhook hears of them.
    """
    if not drafts:
        return [], info
    # inv. 8: seq comes from the locked row's next_seq, so it is gap-free.
    done = append_at_txn(
        conn, info.id, drafts, next_seq=info.next_seq,
        state_after=state_after or (lambda _: info.fsm),
        now=now or max(info.updated_at, *(draft.created_at for draft in drafts)),
        outbox=outbox,
    )
    if done is None:  # a lost lock is loud, never a gap
        raise Conflict(f"conversation {info.id} changed under its lock")
    return done


def append_at_txn(
    conn: Connection,
    conversation_id: str,
    drafts: Sequence[EventDraft],
    *,
    next_seq: int,
    state_after: Callable[[list[Event]], FsmState],
    now: datetime,
    outbox: bool = True,
) -> tuple[list[Event], ConversationInfo] | None:
    """Insert drafts from `next_seq` on, if the log still ends there; None if it moved.

    The row's UPDATE comes first and takes the lock (inv. 8), so the append needs no
    `SELECT … FOR NO KEY UPDATE` before it: one statement fewer than `append_txn`. On
    PostgreSQL the events' INSERT is part of that statement and runs only if the row moved,
    and the same statement reads the tenant's webhook endpoints for the outbox.
    """
    appended = as_events(conversation_id, next_seq, drafts)
    endpoints = None  # the tenant's webhook endpoints, when read with the move
    move: dict[str, Any] = {"old_seq": next_seq, "new_seq": next_seq + len(appended),
            "fsm": state_after(appended), "now": now}
    if dialects.of(conn).one_statement_commit and 0 < len(appended) <= MERGED_EVENTS:
        params = {**move_params(conversation_id, **move),
                  **row_parameters("e", map(event_values, appended))}
        row = conn.execute(_move_and_insert(len(appended)), params).first()
        if row is None:
            return None
        moved = conversation_from_row(row)
        endpoints = row.webhook_endpoints or []
    else:
        after = move_next_seq_txn(conn, conversation_id, **move)
        if after is None:
            return None
        moved = after
        if appended:
            conn.execute(events.insert(), [event_values(event) for event in appended])
    if outbox:  # the news of these events commits with them, or not at all (the outbox)
        found = occurrences(appended, move["fsm"])
        record_outbox_txn(conn, tenant=moved.tenant, conversation_id=conversation_id,
                          occurrences=found, now=now, endpoints=endpoints)
        if moved.parent is not None and any(o.type in TURN_ENDS for o in found):
            _schedule_handover_txn(conn, moved, now=now)
    return appended, moved


TURN_ENDS = ("turn.completed", "turn.failed")


def _schedule_handover_txn(conn: Connection, child: ConversationInfo, *, now: datetime) -> None:
    """A child's turn ended: schedule the step that hands its answer to the parent's call, in
    the transaction that ends it, so no crash can lose the handover (agentq.runtime.children)."""
    parent = child.parent
    assert parent is not None
    step = Step.child(parent.conversation_id, parent.tool_call_id)
    schedule_step_txn(conn, NewStep.of(step, parent.conversation_id, task_id(step.key),
                                       tenant=child.tenant), now=now)


# At most this many events are appended in the statement that moves the row: one such
# statement is built and kept per count, and a longer append (a fork copying a log) is
# rare enough to pay its second round trip.
MERGED_EVENTS = 16


@cache
def _move_and_insert(count: int) -> Select[Any]:
    """Move the row on and insert `count` events, only if it moved: the events' INSERT reads
    the UPDATE's RETURNING, the one way one part of a statement sees another's write. The
    row comes back with its tenant's webhook endpoints (`outbox.endpoints_of`)."""
    moved = MOVE_NEXT_SEQ.cte("moved")
    hooks = endpoints_of(moved.c.tenant).label("webhook_endpoints")
    return select(moved, hooks).add_cte(inserting_after(moved, count))


def inserting_after(moved: Any, count: int) -> Any:
    """The INSERT of `count` events (parameters `e<i>_<column>`), only if the row `moved`
    (a CTE of the same statement) moved on: a CTE of that statement."""
    names = [column.name for column in events.c]
    source = parameter_rows(events, names, "e", count, where=select(moved.c.id).exists())
    return insert(events).from_select(names, source).cte("appended")


def as_events(conversation_id: str, next_seq: int, drafts: Sequence[EventDraft]) -> list[Event]:
    return [
        Event(
            id=str(uuid.uuid4()),
            conversation_id=conversation_id,
            seq=next_seq + offset,
            type=draft.type,
            turn_id=draft.turn_id,
            round_id=draft.round_id,
            step_key=draft.step_key,
            content=draft.content,
            created_at=draft.created_at,
        )
        for offset, draft in enumerate(drafts)
    ]


def event_values(event: Event) -> dict[str, Any]:
    return {
        "id": event.id,
        "conversation_id": event.conversation_id,
        "seq": event.seq,
        "type": event.type,
        "turn_id": event.turn_id,
        "round_id": event.round_id,
        "step_key": event.step_key,
        "content": event.content,
        "created_at": event.created_at,
    }


def start_child_txn(conn: Connection, info: ConversationInfo, first: EventDraft, *,
                    now: datetime) -> bool:
    """Insert the child conversation `info` and its first event unless the row exists."""
    values = {"id": info.id, "tenant": info.tenant,
              "settings": info.settings.model_dump(mode="json"), "fsm_state": info.fsm.to_json(),
              "status": info.status, "next_seq": 1, "created_at": now, "updated_at": now,
              "agent_name": None if info.agent is None else info.agent.name,
              "agent_version": None if info.agent is None else info.agent.version,
              **parent_values(info.parent)}
    if conn.execute(insert_ignoring(conn, conversations), values).rowcount != 1:
        return False
    append_at_txn(conn, info.id, [first], next_seq=1, now=now,
                  state_after=lambda appended: fold(appended, FsmState()))
    return True






def save_summary_txn(
    conn: Connection,
    *,
    conversation_id: str,
    from_seq: int,
    to_seq: int,
    content: dict[str, Any],
    version: int,
    now: datetime,
) -> bool:
    """Insert one summary; a second one for the same `to_seq` is a no-op (inv. 5)."""
    values = {
        "id": str(uuid.uuid4()),
        "conversation_id": conversation_id,
        "from_seq": from_seq,
        "to_seq": to_seq,
        "content": content,
        "version": version,
        "created_at": now,
    }
    result = conn.execute(insert_ignoring(conn, summaries), values)
    return result.rowcount == 1




















