"""Soft budget thresholds: past a share of a budget, a turn asks a person before it spends
more, instead of failing.

The operator's policy sets the share (`ask_at_percent`). The model step that finds a total
at or past it, with no decision yet in its turn, opens a pending call of its own kind
(`BUDGET_CALL`, carrying the budget, what was spent and the limit) and the turn waits for
a person like any human call. Approved, the turn goes on up to the hard limits; rejected,
its next model step fails it as a budget failure. The decision is read from the turn's
own events, so every worker reads the same. Pure.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from agentq.core.events import Event
from agentq.core.prices import format_money
from agentq.core.token_budgets import WHOLE, Meter, Overspent, Unit, period_end

BUDGET_CALL = "budget"  # the name and `kind` of the pending call a soft threshold opens


def budget_call_id(turn_id: str) -> str:
    """The id of the turn's budget call: one per turn, so its decision holds for the turn."""
    return f"{BUDGET_CALL}_{turn_id}"


def is_budget_call(event: Event) -> bool:
    """Whether `event` is the tool_call of a budget question (never one the model made)."""
    return event.type == "tool_call" and event.content.get("kind") == BUDGET_CALL


def soft_reached(budgeted: Sequence[tuple[Meter, int]], spent: Mapping[Meter, int],
                 now: datetime, percent: int, *, unit: Unit = "tokens") -> Overspent | None:
    """The first budget whose total reached `percent` of it (the hard limits are checked
    first: a budget past its limit is not asked about)."""
    for meter, limit in budgeted:
        total = spent.get(meter, 0)
        if total * 100 >= limit * percent:
            until = None if meter.period == WHOLE else period_end(meter.period, now)
            return Overspent(meter.scope, meter.name, meter.period, limit, total, until, unit)
    return None


def soft_message(reached: Overspent, percent: int) -> str:
    """What the pending call says: which budget, how far, and that a person decides."""
    if reached.unit == "cost":
        spent, limit = format_money(reached.spent), format_money(reached.limit)
    else:
        spent, limit = f"{reached.spent} tokens", f"{reached.limit} tokens"
    whose = {"tenant": "the tenant's", "agent": f"agent {reached.name!r}'s",
             "conversation": "this conversation's"}[reached.scope]
    span = "" if reached.period == WHOLE else f" per {reached.period}"
    return (f"{whose} budget{span}: {spent} of {limit} spent, past {percent}%; a person "
            "decides whether the turn goes on")


def expired(turn: Sequence[Event], turn_id: str) -> bool:
    """Whether the turn's budget call expired unanswered (a schedule's run nobody attends)."""
    call_id = budget_call_id(turn_id)
    return any(e.type == "tool_result" and e.content.get("tool_call_id") == call_id
               and e.content.get("status") == "expired" for e in turn)


def decision(turn: Sequence[Event], turn_id: str) -> bool | None:
    """What a person decided on the turn's budget call: True (go on), False (stop), None
    (not asked, or not answered yet)."""
    call_id = budget_call_id(turn_id)
    for event in turn:
        if event.type == "tool_result" and event.content.get("tool_call_id") == call_id:
            output = event.content.get("output")
            return isinstance(output, dict) and output.get("approved") is True
    return None
