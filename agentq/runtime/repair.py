"""Repairs: re-drive what the broker lost (beat's periodic sweep, and the `Sweeper`'s sweep
of what just fell due), and drop old bookkeeping.

Both are safe to run twice at once (docs/design.md §6): the sweeper only asks for work
whose steps are idempotent, and gc only deletes finished rows.
"""
from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from agentq.core.decide import Step
from agentq.followups import Advance, Expire, FollowUp, RunTool
from agentq.runtime.context import StepContext
from agentq.store import StepRecord


def sweep(ctx: StepContext) -> list[FollowUp]:
    """Re-drive what the broker lost: overdue calls, stale steps, stalled conversations, and
    waiting steps whose tenant has a free slot (a lease ran out, or a wake-up was missed)."""
    store, now = ctx.store, ctx.clock()
    follow: list[FollowUp] = []
    for call in store.backlog.list_overdue_calls(now=now):
        key = Step.expire(call.conversation_id, call.id).key
        follow.append(Expire(call.conversation_id, call.id, key, None))
    grace = timedelta(seconds=ctx.config.sweep_s)
    for step, tool in store.backlog.list_stale_steps(now=now, scheduled_before=now - grace):
        follow.append(redrive(step, tool))
    follow.extend(_waiting_with_a_free_slot(ctx))
    for conversation_id in store.backlog.list_stalled_conversations(updated_before=now - grace, now=now):
        follow.append(Advance(conversation_id))
    return list(dict.fromkeys(follow))


LAPSED_PAGE = 100  # steps re-driven per wake of the sweeper


def sweep_due(ctx: StepContext, *, after: datetime, now: datetime, grace_s: float
              ) -> tuple[list[FollowUp], bool]:
    """Re-drive what fell due in (after, now]: leases that ran out, and `grace_s` after their
    own ETA tasks were due, holds that ended and pending calls' deadlines (`Sweeper`).

    True with them when every lapsed step of the window was re-driven; False when there were
    more than a page: the window must be swept again once these are taken (a dead worker's
    leases, renewed together, all run out at the same instant).
    """
    store, grace = ctx.store, timedelta(seconds=grace_s)
    follow: list[FollowUp] = []
    for call in store.sweeps.list_calls_due(after=after - grace, now=now - grace):
        key = Step.expire(call.conversation_id, call.id).key
        follow.append(Expire(call.conversation_id, call.id, key, None))
    lapsed = store.sweeps.list_lapsed_steps(lease_after=after, lease_now=now, hold_after=after - grace,
                                            hold_now=now - grace, limit=LAPSED_PAGE)
    follow.extend(redrive(step, tool) for step, tool in lapsed)
    if lapsed:  # a dead worker's slots are free again
        follow.extend(_waiting_with_a_free_slot(ctx))
    return list(dict.fromkeys(follow)), len(lapsed) < LAPSED_PAGE


def redrive(step: StepRecord, tool: str | None) -> FollowUp:
    """The task that takes the step up again: its tool call, or its conversation's advance."""
    return take_up(step.conversation_id, step.kind, step.ref, step.step_key, tool)


def take_up(conversation_id: str, kind: str, ref: Mapping[str, Any], step_key: str,
            tool: str | None) -> FollowUp:
    """The task that runs a step of `kind` again (`redrive`, `StepWork.redrive`)."""
    if kind in ("tool", "child"):  # a sub-agent call's steps run as its tool task
        return RunTool(conversation_id, ref["tool_call_id"], step_key, tool=tool)
    return Advance(conversation_id)


def _waiting_with_a_free_slot(ctx: StepContext) -> list[FollowUp]:
    """Each tenant's first waiting steps, as many as it has slots free (in arrival order)."""
    running, waiting = ctx.store.backlog.list_waiting_steps(now=ctx.clock())
    taken: dict[str, int] = dict(running)
    follow: list[FollowUp] = []
    for step, tool in waiting:
        cap = ctx.rules.running_steps(step.tenant)
        if cap is not None and taken.get(step.tenant, 0) >= cap:
            continue
        taken[step.tenant] = taken.get(step.tenant, 0) + 1
        follow.append(redrive(step, tool))
    return follow


def gc(ctx: StepContext, *, keep_s: float) -> int:
    """Drop finished step rows older than `keep_s` and audit rows past their TTL.

    The log keeps the story; both of these are bookkeeping. Returns rows dropped.
    """
    now = ctx.clock()
    steps = ctx.store.steps.delete_finished(finished_before=now - timedelta(seconds=keep_s))
    audits = ctx.store.audit.delete_before(
        before=now - timedelta(seconds=ctx.config.audit_ttl_s)
    )
    return steps + audits
