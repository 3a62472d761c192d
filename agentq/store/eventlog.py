"""The log and what is derived from it: events, summaries, and the view a step loads."""
from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import (
    CompoundSelect,
    Connection,
    Row,
    Select,
    and_,
    bindparam,
    func,
    insert,
    literal_column,
    null,
    select,
    type_coerce,
    union_all,
)

from agentq.core.decide import Step
from agentq.core.events import Event, EventDraft, FsmState, Summary, View
from agentq.core.fsm import fold
from agentq.core.keys import task_id
from agentq.core.occurrences import occurrences
from agentq.errors import Conflict
from agentq.store import dialects
from agentq.store.calls import list_open_calls_txn
from agentq.store.conversations import (
    MOVE_NEXT_SEQ,
    ConversationInfo,
    conversation_from_row,
    move_next_seq_txn,
    move_params,
    parent_values,
)
from agentq.store.engine import insert_ignoring, param, parameter_rows, row_parameters
from agentq.store.event_cache import EventCache
from agentq.store.inbox import list_inbox_txn
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


def list_events_txn(
    conn: Connection,
    conversation_id: str,
    *,
    after_seq: int,
    limit: int | None,
    before_seq: int | None = None,
) -> list[Event]:
    query = _events_page(limited=limit is not None, bounded=before_seq is not None)
    params = {"conversation_id": conversation_id, "after_seq": after_seq,
              "before_seq": before_seq, "limit": limit}
    return [event_from_row(row) for row in conn.execute(query, params)]


@cache
def _events_page(*, limited: bool, bounded: bool) -> Select[Any]:
    c = events.c
    query = (
        select(events)
        .where(c.conversation_id == param(c.conversation_id), c.seq > param(c.seq, "after_seq"))
        .order_by(c.seq)
    )
    if bounded:
        query = query.where(c.seq < param(c.seq, "before_seq"))
    return query.limit(bindparam("limit")) if limited else query


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


def summary_from_row(row: Row[Any], prefix: str = "") -> Summary:
    return record_from_row(Summary, row, prefix)


def list_summaries_txn(conn: Connection, conversation_id: str) -> list[Summary]:
    query = (
        select(summaries)
        .where(summaries.c.conversation_id == conversation_id)
        .order_by(summaries.c.to_seq)
    )
    return [summary_from_row(row) for row in conn.execute(query)]


def load_view_txn(
    conn: Connection, conversation_id: str, *, turn_only: bool = False,
    cache: EventCache | None = None,
) -> View | None:
    """The view in up to four indexed queries: row + latest summary + events, open calls, inbox.

    With `turn_only`, events start at the current turn's user_msg: what deciding needs,
    and a cost that does not grow with the length of the conversation. The cached state
    says whether there are open calls, and the inbox only matters between turns (a
    message that comes in while a turn runs is handled when it is posted), so those
    queries run only when they can return something that counts (inv. 1 keeps the
    cache true to the log). With an event `cache` (committed reads only), only the events
    the cache does not hold yet are read, in the statement that reads the row when the
    cache holds some of the conversation's.
    """
    known = None if cache is None else cache.last_seq(conversation_id)
    head, newer = _read_head(conn, conversation_id, known)
    if head is None:
        return None
    info = conversation_from_row(head)
    fsm = info.fsm
    summary = None if head.summary_id is None else summary_from_row(head, "summary_")
    after_seq = summary.to_seq if summary else 0
    if turn_only and fsm.turn_seq:
        after_seq = max(after_seq, fsm.turn_seq - 1)
    has_open_calls = bool(fsm.pending or fsm.running)
    between_turns = fsm.state not in ("running", "awaiting_input")
    return View(
        conversation_id=info.id,
        tenant=info.tenant,
        agent=info.agent,
        parent=info.parent,
        settings=info.settings,
        status=info.status,
        fsm=fsm,
        summary=summary,
        # bounded by the row: a reader outside one snapshot sees the same
        events=tuple(_events_between(conn, info.id, after_seq, info.next_seq, cache,
                                     read=None if known is None else (known, newer))),
        open_calls=tuple(list_open_calls_txn(conn, info.id)) if has_open_calls else (),
        inbox=tuple(list_inbox_txn(conn, info.id, taken=False)) if between_turns else (),
    )


def _read_head(
    conn: Connection, conversation_id: str, known: int | None
) -> tuple[Row[Any] | None, list[Event]]:
    """The row with its latest summary; with `known`, also the events after that seq and
    below the row's next_seq, read in the same statement (so they agree with the row)."""
    if known is None:
        return conn.execute(_VIEW_HEAD, {"conversation_id": conversation_id}).first(), []
    rows = conn.execute(_VIEW_HEAD_AND_NEWER, {"conversation_id": conversation_id,
                                               "after_seq": known}).all()
    if not rows or rows[0].part != 0:  # no row: the events branch is bounded by it too
        return None, []
    return rows[0], [record_from_row(Event, row, "event_") for row in rows[1:]]


def _view_head(*more: Any) -> Select[Any]:
    """The conversation row joined to its latest summary (None when there is none)."""
    cid = param(conversations.c.id, "conversation_id")
    latest_to_seq = (
        select(func.max(summaries.c.to_seq))
        .where(summaries.c.conversation_id == cid)
        .scalar_subquery()
    )
    joined = conversations.outerjoin(
        summaries,
        and_(
            summaries.c.conversation_id == conversations.c.id,
            summaries.c.to_seq == latest_to_seq,
        ),
    )
    return (
        select(conversations, *(column.label("summary_" + column.name) for column in summaries.c),
               *more)
        .select_from(joined)
        .where(conversations.c.id == cid)
    )


def _view_head_and_newer() -> CompoundSelect:
    """The head (part 0) and the events after `after_seq` below its next_seq (part 1), in
    one statement: the head row first, then the events in seq order.

    Each part leaves the other's columns NULL, so the row, its settings and its summary
    are sent and decoded once, not once per event.
    """
    head = _view_head(literal_column("0").label("part"),
                      *(_null_as(column, "event_" + column.name) for column in events.c))
    cid = param(events.c.conversation_id, "conversation_id")
    next_seq = select(conversations.c.next_seq).where(conversations.c.id == cid).scalar_subquery()
    head_columns = list(head.selected_columns)[:-len(events.c) - 1]
    newer = select(
        *(_null_as(column, column.name) for column in head_columns),
        literal_column("1").label("part"),
        *(column.label("event_" + column.name) for column in events.c),
    ).where(
        events.c.conversation_id == cid,
        events.c.seq > param(events.c.seq, "after_seq"),
        events.c.seq < next_seq,
    )
    both: CompoundSelect[Any] = union_all(head, newer)
    return both.order_by(both.selected_columns.part, both.selected_columns.event_seq)


def _null_as(column: Any, name: str) -> Any:
    """NULL in the column's type, so the result decodes as that column would."""
    return type_coerce(null(), column.type).label(name)


_VIEW_HEAD = _view_head()  # built once: every step reads it
_VIEW_HEAD_AND_NEWER = _view_head_and_newer()


def _events_between(
    conn: Connection, conversation_id: str, after_seq: int, before_seq: int,
    cache: EventCache | None, read: tuple[int, list[Event]] | None = None,
) -> list[Event]:
    """`read`: the events after a seq, below `before_seq`, read already with the row."""
    def load(after: int, before: int) -> list[Event]:
        if read is not None and (after, before) == (read[0], before_seq):
            return read[1]
        return list_events_txn(conn, conversation_id, after_seq=after, limit=None,
                               before_seq=before)

    if cache is None:
        return load(after_seq, before_seq)
    return cache.events(conversation_id, after_seq=after_seq, before_seq=before_seq, load=load)


def with_history_txn(conn: Connection, turn: View, cache: EventCache | None = None) -> View:
    """A turn's view grown to the whole context: the events between the summary and the turn.

    Events never change, so the earlier ones join the turn's without a gap.
    """
    after = turn.summary.to_seq if turn.summary else 0
    if not turn.events or turn.events[0].seq <= after + 1:
        return turn
    earlier = _events_between(conn, turn.conversation_id, after, turn.events[0].seq, cache)
    return replace(turn, events=(*earlier, *turn.events))
