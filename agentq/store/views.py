"""Reads of the log: pages of events, summaries, and the view a step decides from (its
latest summary, the events after it or only the current turn's, open calls and inbox),
read as of the conversation's row and, in a worker, partly from its event cache.
"""
from __future__ import annotations

from dataclasses import replace
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
    literal_column,
    null,
    select,
    type_coerce,
    union_all,
)

from agentq.core.events import Event, Summary, View
from agentq.store.calls import list_open_calls_txn
from agentq.store.conversations import (
    conversation_from_row,
)
from agentq.store.engine import param
from agentq.store.event_cache import EventCache
from agentq.store.eventlog import event_from_row
from agentq.store.inbox import list_inbox_txn
from agentq.store.schema import conversations, events, record_from_row, summaries


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
