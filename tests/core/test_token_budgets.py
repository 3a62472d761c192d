"""Budget periods are UTC hours, days and months; a budget is spent once reached."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agentq.core.token_budgets import (
    EPOCH,
    WHOLE,
    Meter,
    PeriodBudgets,
    TokenBudgets,
    checks,
    meters_of,
    overspent,
    period_end,
    period_start,
)

NOW = datetime(2026, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)


def test_periods_start_and_end_on_utc_boundaries_and_december_ends_in_january():
    assert period_start("hour", NOW) == datetime(2026, 12, 31, 23, tzinfo=UTC)
    assert period_start("day", NOW) == datetime(2026, 12, 31, tzinfo=UTC)
    assert period_start("month", NOW) == datetime(2026, 12, 1, tzinfo=UTC)
    assert period_end("hour", NOW) == period_end("day", NOW) == period_end("month", NOW) == \
        datetime(2027, 1, 1, tzinfo=UTC)
    assert period_end("month", datetime(2026, 2, 10, tzinfo=UTC)) == \
        datetime(2026, 3, 1, tzinfo=UTC)


def tenant_checks(budgets: TokenBudgets, agent: str | None = None):
    return checks(budgets, agent, "c1", NOW)


def spent(**tokens: int) -> dict[Meter, int]:
    """Totals of the tenant's current periods (hour=…, day=…, month=…)."""
    return {Meter("tenant", "", p, period_start(p, NOW)): n for p, n in tokens.items()}


def test_a_budget_is_spent_once_the_tokens_reach_it_and_unset_periods_never_are():
    budgeted = tenant_checks(TokenBudgets(tokens_per_day=100))
    assert overspent(budgeted, spent(day=99), NOW) is None
    over = overspent(budgeted, spent(day=100), NOW)
    assert over is not None and (over.period, over.limit, over.spent) == ("day", 100, 100)
    assert overspent(tenant_checks(TokenBudgets()), spent(hour=10**9), NOW) is None


def test_a_zero_budget_stops_every_call():
    assert overspent(tenant_checks(TokenBudgets(tokens_per_hour=0)), {}, NOW) is not None


def test_a_total_of_an_earlier_period_counts_nothing_in_this_one():
    budgeted = tenant_checks(TokenBudgets(tokens_per_hour=10))
    last_hour = {Meter("tenant", "", "hour", period_start("hour", NOW) - timedelta(hours=1)): 50}
    assert overspent(budgeted, last_hour, NOW) is None


def test_a_call_adds_to_its_tenants_and_agents_periods_and_its_conversations_life():
    meters = meters_of("support", "c1", NOW)
    assert [(m.scope, m.name, m.period) for m in meters] == [
        ("tenant", "", "hour"), ("tenant", "", "day"), ("tenant", "", "month"),
        ("agent", "support", "hour"), ("agent", "support", "day"), ("agent", "support", "month"),
        ("conversation", "c1", WHOLE)]
    assert [m.scope for m in meters_of(None, "c1", NOW)] == ["tenant"] * 3 + ["conversation"]


def test_an_agents_budget_holds_for_that_agent_only():
    budgets = TokenBudgets(agents={"support": PeriodBudgets(tokens_per_day=5)})
    totals = {Meter("agent", "support", "day", period_start("day", NOW)): 5}
    over = overspent(checks(budgets, "support", "c1", NOW), totals, NOW)
    assert over is not None and (over.scope, over.name, over.period) == ("agent", "support", "day")
    assert "of agent 'support' this day is spent" in over.message()
    assert overspent(checks(budgets, "sales", "c1", NOW), totals, NOW) is None
    assert overspent(checks(budgets, None, "c1", NOW), totals, NOW) is None


def test_a_conversations_budget_never_resets_and_is_named_before_those_that_do():
    budgets = TokenBudgets(tokens_per_hour=1, tokens_per_conversation=10)
    totals = {**spent(hour=3), Meter("conversation", "c1", WHOLE, EPOCH): 10}
    over = overspent(checks(budgets, None, "c1", NOW), totals, NOW)
    assert over is not None and over.scope == "conversation" and over.until is None
    assert "does not reset" in over.message()
    details = over.details("acme", None, "c1")
    assert details["resets_at"] is None and details["conversation_id"] == "c1"


def test_of_several_spent_budgets_a_turn_waits_for_the_one_that_resets_last():
    now = datetime(2026, 11, 21, 22, 30, tzinfo=UTC)
    budgets = TokenBudgets(tokens_per_hour=1, tokens_per_month=1)
    totals = {Meter("tenant", "", p, period_start(p, now)): 1 for p in ("hour", "month")}
    over = overspent(checks(budgets, None, "c1", now), totals, now)
    assert over is not None and over.period == "month"
    assert over.until == datetime(2026, 12, 1, tzinfo=UTC)
