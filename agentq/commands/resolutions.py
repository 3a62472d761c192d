"""The writes of an answer to a pending call, once agentq.core.resolution_rules has said which.

Each runs under the conversation's lock the command holds: a conditional transition of the
call's row (losing a race to another answer changes nothing and is a 409), the events that
record it, and the follow-ups that move the conversation on.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from agentq.commands.refusals import refused
from agentq.core import drafts
from agentq.core.decide import Step
from agentq.core.deciders import Decider, signed
from agentq.core.events import EventDraft, ToolCallRecord
from agentq.core.fsm import round_closed
from agentq.core.resolution_rules import late
from agentq.followups import Advance, FollowUp, RunTool, Settled


def approve_call(
    tx, call: ToolCallRecord, *, by: str, now: datetime, args: dict[str, Any] | None = None,
    decider: Decider | None = None,
) -> tuple[ToolCallRecord, list[FollowUp]]:
    """The gated call runs as that very call: same id, the arguments the person saw, or
    the `args` they edited (agentq.core.edits)."""
    if args is None:
        moved = tx.transition_call(call.id, from_statuses=["pending"], to_status="scheduled",
                                   now=now, result=None)
    else:
        moved = tx.approve_edited(call.id, args=args, model_args=call.args)
    drafted = signed([drafts.approval(call, by=by, created_at=now, args=args)], decider)
    decided = _recorded(tx, call, moved, drafted, now=now)[0]
    step_key = Step.tool(call.conversation_id, call.id).key  # the call's own step: it runs once (inv. 5)
    return decided, [RunTool(call.conversation_id, call.id, step_key, tool=call.name),
                     Settled(call.conversation_id, call.id, "approved")]


def reject_call(
    tx, call: ToolCallRecord, *, by: str, reason: str | None, now: datetime,
    decider: Decider | None = None,
) -> tuple[ToolCallRecord, list[FollowUp]]:
    """The gated call never runs; the model reads why."""
    moved = tx.transition_call(
        call.id, from_statuses=["pending"], to_status="rejected", now=now,
        result={"status": "rejected", "by": by, "reason": reason},
    )
    drafted = signed(drafts.rejection(call, by=by, reason=reason, created_at=now), decider)
    decided, closed_round = _recorded(tx, call, moved, drafted, now=now)
    return decided, _settled(call, "rejected", closed_round)


def close_call(
    tx, call: ToolCallRecord, *, by: str, status: str, result: Any, now: datetime,
    decider: Decider | None = None,
) -> tuple[ToolCallRecord, list[FollowUp]]:
    """A human or client call takes its result."""
    moved = tx.transition_call(call.id, from_statuses=["pending"], to_status=status, now=now,
                               result=result)
    drafted = signed(drafts.closed_call(call, status, result, by=by, created_at=now), decider)
    closed, closed_round = _recorded(tx, call, moved, drafted, now=now)
    return closed, _settled(call, status, closed_round)


def _recorded(
    tx, call: ToolCallRecord, moved: bool, drafted: list[EventDraft], *, now: datetime,
) -> tuple[ToolCallRecord, bool]:
    """Append what records the answer, if the call moved; the call as it is now, and
    whether its round is closed."""
    if not moved:
        raise refused(late(f"tool call {call.id} is no longer pending", tx.load_call(call.id)))
    _, fsm = tx.append_and_fold(drafted, now=now)
    updated = tx.load_call(call.id)
    assert updated is not None  # updated under this lock a moment ago
    return updated, round_closed(fsm)


def _settled(call: ToolCallRecord, status: str, closed_round: bool) -> list[FollowUp]:
    """The call stopped waiting; with its round closed, the conversation goes on."""
    settled = Settled(call.conversation_id, call.id, status)
    return [Advance(call.conversation_id), settled] if closed_round else [settled]
