"""Soft budget thresholds: reached at their share of a budget; a turn's decision is the
answer to its own budget call."""
from __future__ import annotations

from datetime import UTC, datetime

from agentq.core.budget_asks import (
    budget_call_id,
    decision,
    expired,
    is_budget_call,
    soft_message,
    soft_reached,
)
from agentq.core.events import Event
from agentq.core.token_budgets import Meter, period_start

NOW = datetime(2026, 11, 29, 8, 30, tzinfo=UTC)


def budget_events(*pairs):
    """A turn's events: ("call", id) or ("result", id, output)."""
    out = []
    for seq, (kind, call_id, *output) in enumerate(pairs, start=1):
        content = ({"tool_call_id": call_id, "name": "budget", "kind": "budget"} if kind == "call"
                   else {"tool_call_id": call_id, "status": "ok", "output": output[0]})
        out.append(Event(id=str(seq), conversation_id="c1", seq=seq,
                         type="tool_call" if kind == "call" else "tool_result", content=content,
                         created_at=NOW, turn_id="t1", round_id="r1", step_key=None))
    return out


def test_a_soft_threshold_is_reached_at_its_share_of_a_budget():
    day = Meter("tenant", "", "day", period_start("day", NOW))
    budgeted = [(day, 1_000)]
    assert soft_reached(budgeted, {day: 799}, NOW, 80) is None
    reached = soft_reached(budgeted, {day: 800}, NOW, 80, unit="cost")
    assert reached is not None and (reached.spent, reached.limit, reached.unit) == (800, 1_000, "cost")
    assert "0.000000800 of 0.000001000 spent, past 80%" in soft_message(reached, 80)


def test_a_turns_budget_decision_is_its_budget_calls_answer():
    call = ("call", budget_call_id("t1"))
    assert decision(budget_events(call), "t1") is None
    assert decision(budget_events(call, ("result", budget_call_id("t1"), {"approved": True})),
                    "t1") is True
    assert decision(budget_events(call, ("result", budget_call_id("t1"),
                                         {"approved": False, "reason": "no"})), "t1") is False
    assert decision(budget_events(("result", "call_x", {"approved": True})), "t1") is None
    assert is_budget_call(budget_events(call)[0])


def test_an_expired_budget_call_is_a_no_that_says_nobody_answered():
    turn_id = "t1"
    call_id = budget_call_id(turn_id)
    events = (Event(id="1", conversation_id="c1", seq=1, type="tool_result", turn_id=turn_id,
                    round_id="r1", step_key=None, created_at=NOW,
                    content={"tool_call_id": call_id, "status": "expired", "output": "no answer"}),)
    assert decision(events, turn_id) is False and expired(events, turn_id)
    assert not expired(budget_events(("result", call_id, {"approved": False})), turn_id)
