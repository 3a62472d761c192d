"""Beat's periodic repairs: re-drive what the broker lost, and drop old bookkeeping.

Both are safe to run twice at once (DESIGN section 6): the sweeper only asks for work
whose steps are idempotent, and gc only deletes finished rows.
"""
from __future__ import annotations

from datetime import timedelta

from agentq.core.decide import Step
from agentq.followups import Advance, Expire, FollowUp, RunTool
from agentq.runtime.context import StepContext


def sweep(ctx: StepContext) -> list[FollowUp]:
    """Re-drive what the broker lost: overdue calls, stale steps, stalled conversations."""
    store, now = ctx.store, ctx.clock()
    follow: list[FollowUp] = []
    for call in store.list_overdue_calls(now=now):
        key = Step.expire(call.conversation_id, call.id).key
        follow.append(Expire(call.conversation_id, call.id, key, None))
    grace = timedelta(seconds=ctx.config.sweep_s)
    for step in store.list_stale_steps(now=now, scheduled_before=now - grace):
        if step.kind == "tool":
            follow.append(RunTool(step.conversation_id, step.ref["tool_call_id"], step.step_key))
        else:
            follow.append(Advance(step.conversation_id))
    for conversation_id in store.list_stalled_conversations(updated_before=now - grace):
        follow.append(Advance(conversation_id))
    return list(dict.fromkeys(follow))


def gc(ctx: StepContext, *, keep_s: float) -> int:
    """Drop finished step rows older than `keep_s` and audit rows past their TTL.

    The log keeps the story; both of these are bookkeeping. Returns rows dropped.
    """
    now = ctx.clock()
    steps = ctx.store.delete_finished_steps(finished_before=now - timedelta(seconds=keep_s))
    audits = ctx.store.delete_model_calls(
        before=now - timedelta(seconds=ctx.config.audit_ttl_s)
    )
    return steps + audits
