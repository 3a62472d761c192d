"""A model step past a budget's soft threshold asks a person instead of calling the model.

It commits, in its step's one commit, the turn's budget call (a pending human call of kind
`budget` whose arguments are the budget, what was spent and the limit) and the suspension
that says the turn waits: the page, the SDK, `agentq chat` and `call.waiting` webhooks see
it as any waiting call. Answered (approved or rejected, as a human call is), its round
closes and the next model step reads the decision (agentq.core.budget_asks). In a
schedule's run nobody attends, the call expires by the run's rule, which counts as a no.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from agentq.core import drafts
from agentq.core.budget_asks import BUDGET_CALL, budget_call_id
from agentq.core.decide import Step
from agentq.core.events import ToolCallRecord, View
from agentq.core.fsm import fold
from agentq.core.schedules import unattended_deadline
from agentq.followups import FollowUp
from agentq.providers.errors import BudgetAsks
from agentq.runtime.context import StepContext
from agentq.runtime.expire_step import expiry
from agentq.store.whole_commit import Scheduling

log = logging.getLogger(__name__)


def ask_about_budget(ctx: StepContext, view: View, step: Step, asks: BudgetAsks, *,
                     worker: str) -> list[FollowUp]:
    """Open the turn's budget call and finish our step; nothing more runs until a person
    answers (their answer sends the next advance) or, in a schedule's run nobody attends,
    the call expires (its expire task is what we send)."""
    cid, now = view.conversation_id, ctx.clock()
    expires_at = unattended_deadline(view.fsm.unattended, now, None)
    turn_id = view.fsm.turn_id or ""
    call_id = budget_call_id(turn_id)
    args = {**(asks.details or {}), "message": str(asks)}
    common: dict[str, Any] = dict(turn_id=turn_id, round_id=step.round_id or "",
                                  step_key=step.key, created_at=now)
    made = drafts.tool_call(call_id, BUDGET_CALL, args, executor="human",
                            expires_at=expires_at, **common)
    made = replace(made, content={**made.content, "kind": BUDGET_CALL})
    record = ToolCallRecord(conversation_id=cid, id=call_id, name=BUDGET_CALL,
                            executor="human", status="pending", args=args,
                            round_id=step.round_id or "", turn_id=turn_id, created_at=now,
                            expires_at=expires_at)
    done = ctx.store.writes.commit_step(
        cid, [made, drafts.suspension([call_id], **common)],
        next_seq=step.ref["after_seq"] + 1,
        state_after=lambda appended: fold(appended, view.fsm), step_key=step.key,
        worker=worker, finish=Scheduling([record], []), now=now)
    ctx.notices.notify(cid, done.events)
    log.warning("step asks a person: %s", asks, extra={"status": "succeeded"})
    if expires_at is None:
        return []
    return [expiry(ctx, cid, call_id, expires_at, now, tool=BUDGET_CALL)]
