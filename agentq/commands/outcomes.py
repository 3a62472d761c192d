"""The writes of a person's answer to an outcome_unknown call (agentq.core.outcome_rules).

Each runs under the conversation's lock the command holds: a conditional transition of the
call's row (losing a race to another answer changes nothing and is a 409), its start mark
updated with the answer, the events that record it, and what moves the conversation on.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from agentq.commands.refusals import refused
from agentq.core import drafts, once
from agentq.core.decide import Step
from agentq.core.deciders import Decider, signed
from agentq.core.events import EventDraft, ToolCallRecord
from agentq.core.fsm import round_closed
from agentq.core.resolution_rules import late
from agentq.followups import Advance, FollowUp, RunTool, Settled


def record_ran(tx, call: ToolCallRecord, *, by: str, result: Any, now: datetime,
               decider: Decider | None = None) -> tuple[ToolCallRecord, list[FollowUp]]:
    """It ran: the call closes with the person's result, which the model reads."""
    recorded = [*signed([drafts.outcome_answer(call, once.RAN, by=by, created_at=now)], decider),
                drafts.tool_result(call.id, "ok", result, turn_id=call.turn_id,
                                   round_id=call.round_id, step_key=None, created_at=now)]
    return _closed(tx, call, once.RAN, "resolved", result, recorded, now=now)


def abandon(tx, call: ToolCallRecord, *, by: str, reason: str | None, now: datetime,
            decider: Decider | None = None) -> tuple[ToolCallRecord, list[FollowUp]]:
    """Abandoned: the model reads an error saying the outcome is unknown."""
    text = once.abandoned_text(call.started or {}, reason)
    recorded = [*signed([drafts.outcome_answer(call, once.ABANDONED, by=by, created_at=now,
                                               reason=reason)], decider),
                drafts.tool_result(call.id, "error", text, turn_id=call.turn_id,
                                   round_id=call.round_id, step_key=None, created_at=now)]
    return _closed(tx, call, once.ABANDONED, "errored", {"status": "error", "output": text},
                   recorded, now=now, reason=reason)


def run_again(tx, call: ToolCallRecord, *, by: str, now: datetime,
              decider: Decider | None = None) -> tuple[ToolCallRecord, list[FollowUp]]:
    """It did not run: the call runs now as its next run, a step of its own (inv. 5), whose
    start is marked like the first's: if it dies too, it is unknown again (inv. 13)."""
    mark = once.answered_mark(call.started or {}, once.DID_NOT_RUN)
    if not tx.transition_call(call.id, from_statuses=["pending"], to_status="scheduled",
                              now=now):
        raise refused(late(f"tool call {call.id} is no longer pending", tx.load_call(call.id)))
    tx.mark_started(call.id, started=mark)
    tx.append_and_fold(signed([drafts.outcome_answer(call, once.DID_NOT_RUN, by=by,
                                                     created_at=now)], decider), now=now)
    updated = tx.load_call(call.id)
    step = Step.tool(call.conversation_id, call.id, call.answers, once.run_of(mark))
    return updated, [RunTool(call.conversation_id, call.id, step.key, tool=call.name),
                     Settled(call.conversation_id, call.id, once.DID_NOT_RUN)]


def _closed(
    tx, call: ToolCallRecord, answer: str, status: str, result: Any, recorded: list[EventDraft],
    *, now: datetime, reason: str | None = None,
) -> tuple[ToolCallRecord, list[FollowUp]]:
    """Close the call with `result`, its mark saying the answer; with its round closed, the
    conversation goes on."""
    if not tx.transition_call(call.id, from_statuses=["pending"], to_status=status, now=now,
                              result=result):
        raise refused(late(f"tool call {call.id} is no longer pending", tx.load_call(call.id)))
    tx.mark_started(call.id, started=once.answered_mark(call.started or {}, answer, reason),
                    statuses=(status,))
    _, fsm = tx.append_and_fold(recorded, now=now)
    updated = tx.load_call(call.id)
    assert updated is not None  # updated under this lock a moment ago
    settled = Settled(call.conversation_id, call.id, answer)
    return updated, [Advance(call.conversation_id), settled] if round_closed(fsm) else [settled]
