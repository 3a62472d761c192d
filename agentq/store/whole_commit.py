"""A step's whole commit, its append and its finish, as one statement on PostgreSQL.

A model or tool step commits an append (its events, after where the log ended when it read
it: inv. 8) and a finish (`step_commit`). As a transaction that is four round trips: BEGIN,
the append, the finish, COMMIT. Here it is one statement in autocommit. Its writes all
depend on guards that lock the rows those writes need, in the order the transaction takes
them (the conversation's row, then the step's, then the call's): the log still ends where
the step read it, the step is still ours, its call is still open. Each lock rechecks the
newest version of its row, so either every write lands or none does.

What one statement does not do goes the transactional way (`Writes.commit_step`), which also
says why a commit is refused (LogMoved, Stale): a guard that refused; an append whose
occurrences (agentq.core.occurrences) an enabled webhook endpoint of the tenant may want, or
that may end a child's turn (the outbox's rows and the hand-over are written there); more
events or calls than a statement is kept for.

Whether a message waits, at a turn's last step, is read after the statement and not in it:
the statement's snapshot is taken before it waits for the conversation's lock, so it could
miss a message posted meanwhile. A read after the commit sees every message posted before
it, and one posted later finds the turn over and starts the next itself.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import ColumnElement, Connection, Select, Update, select

from agentq.core.events import Event, FsmState, ToolCallRecord
from agentq.core.occurrences import occurrences
from agentq.store.calls import CLOSED_FROM, call_values, transition, transition_params
from agentq.store.conversations import (
    MOVE_NEXT_SEQ,
    ConversationInfo,
    conversation_from_row,
    move_params,
)
from agentq.store.engine import param, row_parameters
from agentq.store.eventlog import MERGED_EVENTS, event_values, inserting_after
from agentq.store.ledger import FINISH, NewStep, finish_params, schedule_values
from agentq.store.outbox import endpoints_of
from agentq.store.schema import conversations, steps, tool_calls
from agentq.store.step_commit import (
    MERGED_ROWS,
    Counted,
    Usage,
    UsageShape,
    usage_params,
    usage_shape,
    with_scheduling,
    with_usage,
)
from agentq.store.waits import waited_on


@dataclass(frozen=True)
class SeeingInbox:
    """A turn's last model step: its usage is counted; whether a message waits is read."""

    usage: Usage = None
    # more calls to count: a guardrail agent's each, under its own agent (these go the
    # transactional way, one upsert each: they are rare)
    also: Sequence[Counted] = ()


@dataclass(frozen=True)
class Scheduling:
    """A model step that asked for tools: the round's calls are inserted and their steps
    scheduled (each a no-op if it exists, inv. 5), its usage counted."""

    calls: Sequence[ToolCallRecord]
    scheduled: Sequence[NewStep]
    usage: Usage = None
    also: Sequence[Counted] = ()  # as SeeingInbox's


@dataclass(frozen=True)
class ClosingCall:
    """A tool step: its call moves from `scheduled` to `done` with `result`."""

    call_id: str
    result: Any


Finish = SeeingInbox | Scheduling | ClosingCall


def _none_waits() -> bool:
    return False


@dataclass(frozen=True)
class Committed:
    """What a step's commit wrote: its events, the conversation's row after them, and, for
    a turn's last step, whether a message waits (`message_waits`)."""

    events: list[Event]
    conversation: ConversationInfo
    # whether a message waits, known or read when asked: after the commit, never in its
    # statement (see the module's docstring), so a caller can tell the turn's streams first
    inbox: Callable[[], bool] = _none_waits
    # whether a step of its tenant may wait for the slot it held (agentq.store.waits): a
    # commit that cannot tell says True, and its caller reads what the slot wakes
    waited_on: bool = True

    def message_waits(self) -> bool:
        """Whether a message waits for the turn this commit ended (a read, on PostgreSQL)."""
        return self.inbox()


def commit_whole_txn(
    conn: Connection, appended: Sequence[Event], *, next_seq: int, fsm: FsmState,
    step_key: str, worker: str, finish: Finish, now: datetime,
) -> tuple[ConversationInfo, bool] | None:
    """Append `appended` (from `next_seq` on, leaving the state `fsm`) and finish our step
    with `finish`, in one statement run in autocommit: the moved row and whether the step
    was waited on (`agentq.store.waits`), or None if nothing was written (a guard refused,
    or the commit does not fit one statement)."""
    if not fits(appended, finish):
        return None
    conversation_id = appended[0].conversation_id
    params = {
        **move_params(conversation_id, old_seq=next_seq, new_seq=next_seq + len(appended),
                      fsm=fsm, now=now),
        **row_parameters("e", map(event_values, appended)),
        **finish_params(conversation_id, step_key, worker=worker, now=now),
    }
    calls = scheduled = 0
    usage: Usage = None
    if isinstance(finish, ClosingCall):
        params.update(transition_params(conversation_id, finish.call_id, to_status="done",
                                        now=now, result=finish.result))
    else:
        usage = finish.usage
        params.update(usage_params(usage))
    if isinstance(finish, Scheduling):
        calls, scheduled = len(finish.calls), len(finish.scheduled)
        params.update(row_parameters("call", map(call_values, finish.calls)))
        params.update(row_parameters("step", (schedule_values(s, now=now)
                                              for s in finish.scheduled)))
    told = bool(occurrences(appended, fsm))
    statement = _whole(len(appended), isinstance(finish, ClosingCall), calls, scheduled,
                       usage_shape(usage), told)
    row = conn.execute(statement, params).first()
    return None if row is None else (conversation_from_row(row), bool(row.waited_on))


def fits(appended: Sequence[Event], finish: Finish) -> bool:
    """Whether one statement kept for its shape takes this commit."""
    if not 0 < len(appended) <= MERGED_EVENTS:
        return False
    if not isinstance(finish, ClosingCall) and finish.also:
        return False
    return not isinstance(finish, Scheduling) or max(
        len(finish.calls), len(finish.scheduled)) <= MERGED_ROWS


@cache
def _whole(count: int, closing: bool, calls: int, scheduled: int, usage: UsageShape,
           told: bool) -> Select[Any]:
    """One statement per shape, built once: the guards, then every write under them."""
    c = conversations.c
    here = select(c.id).where(c.id == param(c.id, "cid"),
                              c.next_seq == param(c.next_seq, "old_seq"))
    if told:  # no outbox rows or hand-over to write: else the transactional way writes them
        here = here.where(c.parent_conversation_id.is_(None), endpoints_of(c.tenant).is_(None))
    # each guard is what its write will find, locked: FINISH's and the close's own conditions
    last = here.with_for_update(key_share=True).cte("here")
    mine = select(steps.c.step_key, steps.c.waited_on).where(_condition(FINISH),
                                                            select(last).exists())
    last = owned = mine.with_for_update(key_share=True).cte("mine")
    close = transition(CLOSED_FROM, with_result=True, terminal=True)
    if closing:
        open_call = select(tool_calls.c.id).where(_condition(close), select(last).exists())
        last = open_call.with_for_update(key_share=True).cte("open_call")
    guarded = select(last).exists()

    moved = MOVE_NEXT_SEQ.where(guarded).cte("moved")
    # the flag as the lock found it: FOR NO KEY UPDATE waits for a mark in flight and reads
    # the row's newest version (agentq.store.waits)
    statement = select(moved, waited_on(owned).label("waited_on")).add_cte(
        inserting_after(moved, count),
        FINISH.where(guarded).returning(steps.c.step_key).cte("finished"),
    )
    if closing:
        statement = statement.add_cte(
            close.where(guarded).returning(tool_calls.c.id).cte("closed"))
    statement = with_scheduling(statement, calls, scheduled, where=guarded)
    return with_usage(statement, usage, where=guarded)


def _condition(update: Update) -> ColumnElement[bool]:
    """The WHERE of a conditional UPDATE, for a guard that locks what it will find."""
    assert update.whereclause is not None
    return update.whereclause
