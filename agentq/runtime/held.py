"""Steps held by their endpoint's circuit breaker or a spent token budget: kept in the ledger,
re-driven when they may call.

A held step occupies no worker thread and sends no call: the ledger holds it until the
breaker's time (the sweeper leaves it be), a `retry` notice tells the stream why, and an
advance goes with that time as its ETA.
"""
from __future__ import annotations

import logging
from datetime import timedelta

from agentq.core.breaker import Wait
from agentq.core.decide import Step
from agentq.core.events import View
from agentq.core.keys import task_id
from agentq.core.occurrences import Occurrence
from agentq.core.timefmt import format_ts
from agentq.followups import Advance, FollowUp
from agentq.providers.errors import BudgetWaits, CallWaits
from agentq.runtime.context import StepContext
from agentq.runtime.expire_step import eta
from agentq.runtime.seams import Announcer
from agentq.store import NewStep

log = logging.getLogger(__name__)

# A held step is re-driven up to this share of its wait later (its own, fixed share), so the
# steps waiting on one breaker do not all come back at once.
SPREAD = 0.2
MAX_SPREAD_S = 15.0


def hold_for_breaker(
    ctx: StepContext, announcer: Announcer, view: View, step: Step,
    wait: Wait, *, worker: str | None = None,
) -> list[FollowUp]:
    """Hold `step` until the breaker lets it call; with `worker`, the step was ours, running.

    A step held again for the same time (a sweeper's re-drive) sends nothing more.
    """
    return _hold(ctx, announcer, view, step, wait, worker=worker, notice={"circuit": "open"})


def hold_waiting_call(
    ctx: StepContext, announcer: Announcer, view: View, step: Step,
    waits: CallWaits, *, worker: str,
) -> list[FollowUp]:
    """Hold our running `step`, whose call may not go out before `waits.until`: its
    endpoint's breaker is open, or a token budget is spent until its period resets (then a
    `budget.exceeded` webhook is sent, once per wait: its key is the log's last seq)."""
    wait = Wait(waits.until, waits.message)
    if not isinstance(waits, BudgetWaits):
        return hold_for_breaker(ctx, announcer, view, step, wait, worker=worker)
    details = waits.details or {}
    return _hold(ctx, announcer, view, step, wait, worker=worker, notice={"budget": details},
                 occurrence=Occurrence("budget.exceeded", view.last_seq, details))


def _hold(
    ctx: StepContext, announcer: Announcer, view: View, step: Step,
    wait: Wait, *, worker: str | None, notice: dict, occurrence: Occurrence | None = None,
) -> list[FollowUp]:
    now = ctx.clock()
    wait_s = max((wait.until - now).total_seconds(), 0.0)
    share = int(step.key[:8], 16) / 0xFFFFFFFF
    until = wait.until + timedelta(seconds=min(wait_s * SPREAD, MAX_SPREAD_S) * share)
    new = NewStep.of(step, view.conversation_id, task_id(step.key), tenant=view.tenant)
    if not ctx.store.steps.hold(new, until=until, reason=wait.reason, now=now, worker=worker,
                                occurrence=occurrence):
        return []
    log.warning("step held until %s: %s", format_ts(until), wait.reason,
                extra={"status": "scheduled"})
    announced = announcer.round(view.conversation_id, turn_id=view.fsm.turn_id,
                                round_id=step.round_id)
    announced.retry(None, wait.reason, round((until - now).total_seconds(), 3), transient=True,
                    until=format_ts(until), **notice)
    return [Advance(view.conversation_id, eta=eta(until, now, ctx.config.eta_horizon_s))]
