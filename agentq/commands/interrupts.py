"""Ending a turn early: what an interrupt, a cancel, or a new turn after a failure write.

In one transaction, under the conversation lock: the running steps of the turn are
cancelled (a worker still streaming loses its lease and closes its stream), the partial
answer is kept as an `assistant_msg` marked interrupted, and every open call gets a
`cancelled` result (inv. 3), pending human calls a `cancelled` resolution too.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime

from agentq.core import drafts
from agentq.core.events import EventDraft, ToolCallRecord
from agentq.core.keys import MODEL_STEP
from agentq.core.subagents import AGENT_EXECUTOR, CHILD_STEP, child_conversation_id
from agentq.followups import Settled

CANCELLED_OUTPUT = "cancelled: the turn was interrupted"

# round_id -> the text streamed so far (best effort; "" when unknown); no later delta of
# that round reaches a stream (PubSub.close_round)
CloseRound = Callable[[str], str]


def close_turn(tx, *, by: str, now: datetime, close_round: CloseRound) -> list[Settled]:
    """Close the current turn of the locked conversation, and its sub-agents' turns; returns
    the calls that stopped waiting for a person or the client."""
    cancelled = tx.cancel_open_steps(kinds=(MODEL_STEP, "tool", CHILD_STEP), now=now)
    streaming = next((s for s in cancelled if s.kind == MODEL_STEP and s.status == "running"), None)
    turn_id = tx.conversation.fsm.turn_id
    if streaming is not None:  # inv. 6: the kept text carries the round id of its own step
        marker = drafts.assistant_msg(
            close_round(streaming.round_id), turn_id=turn_id, round_id=streaming.round_id,
            step_key=streaming.step_key, created_at=now, interrupted=True,
        )
    else:
        marker = drafts.assistant_msg(
            "", turn_id=turn_id, round_id=str(uuid.uuid4()), step_key=None, created_at=now,
            interrupted=True,
        )
    closing: list[EventDraft] = [marker]
    settled: list[Settled] = []
    open_calls = tx.view().open_calls
    for call in open_calls:
        drafted = _cancel_call(tx, call, by=by, now=now)
        closing.extend(drafted)
        if drafted and call.status == "pending" and call.executor != AGENT_EXECUTOR:
            settled.append(Settled(call.conversation_id, call.id, "cancelled"))
    tx.append_and_fold(closing, now=now)
    for call in open_calls:
        if call.executor == AGENT_EXECUTOR:
            settled.extend(_cancel_child(tx, call, by=by, now=now, close_round=close_round))
    return settled


def _cancel_child(tx, call: ToolCallRecord, *, by: str, now: datetime,
                  close_round: CloseRound) -> list[Settled]:
    """A sub-agent call was cancelled: its child's turn ends too, in this transaction (and
    its own children's, down the tree)."""
    child = tx.child(child_conversation_id(tx.conversation.id, call.id))
    if child is not None and child.conversation.fsm.state in ("running", "awaiting_input"):
        return close_turn(child, by=by, now=now, close_round=close_round)
    return []


def _cancel_call(tx, call: ToolCallRecord, *, by: str, now: datetime) -> list[EventDraft]:
    if not tx.transition_call(
        call.id, from_statuses=["scheduled", "pending"], to_status="cancelled", now=now,
        result={"status": "cancelled", "output": CANCELLED_OUTPUT},
    ):
        return []
    if call.status == "pending":  # a person was asked: say the question was withdrawn
        return drafts.closed_call(call, "cancelled", CANCELLED_OUTPUT, by=by, created_at=now)
    return [drafts.tool_result(
        call.id, "cancelled", CANCELLED_OUTPUT, turn_id=call.turn_id, round_id=call.round_id,
        step_key=None, created_at=now,
    )]
