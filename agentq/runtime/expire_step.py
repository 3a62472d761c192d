"""The expire step: a pending call that got no answer before its deadline (docs/design.md §6).

Not a claimed step: expiring is one conditional update (`pending → expired`), so a
duplicate, late or raced delivery changes nothing. The broker holds the ETA task only
up to the horizon; one that comes early re-arms itself, and the sweeper catches any
that was lost.
"""
from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from agentq.core import drafts
from agentq.core.decide import Step
from agentq.core.events import ToolCallRecord, View
from agentq.core.schedules import unattended_note
from agentq.core.timefmt import format_ts
from agentq.errors import Stale
from agentq.followups import Expire, FollowUp
from agentq.runtime.context import StepContext, after_result
from agentq.store import ConversationInfo
from agentq.telemetry import NO_SPAN, NoSpan, tracing
from agentq.telemetry.attributes import step_attributes


def eta(expires_at: datetime | None, now: datetime, horizon_s: float) -> datetime:
    """When the broker should deliver an expiry: the deadline, or the horizon if sooner."""
    horizon = now + timedelta(seconds=horizon_s)
    return horizon if expires_at is None else min(expires_at, horizon)


def expiry(ctx: StepContext, conversation_id: str, call_id: str, expires_at: datetime | None,
           now: datetime, *, tool: str | None = None) -> Expire:
    """The expire task of a call that waits for a person until `expires_at` (None: no
    deadline, only the horizon's look), keyed as the call's expire step."""
    return Expire(conversation_id, call_id, Step.expire(conversation_id, call_id).key,
                  eta(expires_at, now, ctx.config.eta_horizon_s), tool=tool)


def arm_expiries(ctx: StepContext, view: View, expiries: Sequence[Step]) -> list[FollowUp]:
    """An expire task, with its ETA, for each pending call of the round."""
    now = ctx.clock()
    by_id = {c.id: c for c in view.open_calls}
    follow: list[FollowUp] = []
    for step in expiries:
        call = by_id.get(step.ref["tool_call_id"])
        if call is not None and call.expires_at is not None:
            when = eta(call.expires_at, now, ctx.config.eta_horizon_s)
            follow.append(Expire(view.conversation_id, call.id, step.key, when))
    return follow


def _expired_text(call: ToolCallRecord, expires_at: datetime,
                  unattended: dict[str, Any] | None) -> str:
    """What the model reads for an expired call; an unapproved call was refused, never run.
    In a run nobody attends, also what kind of wait it was and why no one answered."""
    if call.needs_approval:
        text = (f"refused by the system: no one approved this call before "
                f"{format_ts(expires_at)}. The tool did not run.")
    else:
        text = f"no answer before {format_ts(expires_at)}"
    if unattended is None:
        return text
    if call.elicitation:
        text += ("; the tool server's question for a person went unanswered, so the call "
                 "ended without a result")
    elif call.started:
        text += ("; no one said whether this call ran, so it may have taken effect: "
                 "do not make it again")
    return text + unattended_note(unattended)


def _span(conversation: ConversationInfo, call: ToolCallRecord, key: str) -> NoSpan:
    """The span of an expiry, in its turn's trace; one attempt, as it claims nothing."""
    tracer = tracing()
    if not tracer.enabled:
        return NO_SPAN
    return tracer.step("expire", step_attributes(
        conversation_id=conversation.id, tenant=conversation.tenant, kind="expire", step_key=key,
        attempt=1, turn_id=call.turn_id, round_id=call.round_id,
    ), traceparent=conversation.fsm.trace)


def expire(ctx: StepContext, conversation_id: str, tool_call_id: str) -> list[FollowUp]:
    """Expire a pending call if it is due; re-arm if not."""
    call = ctx.store.calls.load(conversation_id, tool_call_id)
    if call is None or call.status != "pending" or call.expires_at is None:
        return []
    now = ctx.clock()
    key = Step.expire(conversation_id, tool_call_id).key
    if call.expires_at > now:
        when = eta(call.expires_at, now, ctx.config.eta_horizon_s)
        return [Expire(conversation_id, tool_call_id, key, when)]
    try:
        with ctx.store.writes.locked(conversation_id) as tx, _span(tx.conversation, call, key) as span:
            # conditional: a resolution that won the race leaves nothing to expire
            if not tx.transition_call(
                tool_call_id, from_statuses=["pending"], to_status="expired", now=now,
                result={"status": "expired", "output": None},
            ):
                span.outcome("lost")
                raise Stale("the call is no longer pending")
            text = _expired_text(call, call.expires_at, tx.conversation.fsm.unattended)
            events, fsm = tx.append_and_fold(drafts.closed_call(
                call, "expired", text,
                by="system", created_at=now,
            ), now=now)
            span.outcome("succeeded")
    except Stale:
        return []
    ctx.notices.notify(conversation_id, events)
    return after_result(conversation_id, fsm)
