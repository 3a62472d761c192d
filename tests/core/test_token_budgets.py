"""Budget periods are UTC hours, days and months; a budget is spent once reached."""
from __future__ import annotations

from datetime import datetime, timezone

from agentq.core.token_budgets import TokenBudgets, overspent, period_end, period_start

NOW = datetime(2026, 12, 31, 23, 59, 59, 999_999, tzinfo=timezone.utc)


def test_periods_start_and_end_on_utc_boundaries_and_december_ends_in_january():
    assert period_start("hour", NOW) == datetime(2026, 12, 31, 23, tzinfo=timezone.utc)
    assert period_start("day", NOW) == datetime(2026, 12, 31, tzinfo=timezone.utc)
    assert period_start("month", NOW) == datetime(2026, 12, 1, tzinfo=timezone.utc)
    assert period_end("hour", NOW) == period_end("day", NOW) == period_end("month", NOW) == \
        datetime(2027, 1, 1, tzinfo=timezone.utc)
    assert period_end("month", datetime(2026, 2, 10, tzinfo=timezone.utc)) == \
        datetime(2026, 3, 1, tzinfo=timezone.utc)


def test_a_budget_is_spent_once_the_tokens_reach_it_and_unset_periods_never_are():
    budgets = TokenBudgets(tokens_per_day=100)
    assert overspent(budgets, {"day": 99}, NOW) is None
    over = overspent(budgets, {"day": 100}, NOW)
    assert over is not None and (over.period, over.limit, over.spent) == ("day", 100, 100)
    assert overspent(TokenBudgets(), {"hour": 10**9}, NOW) is None


def test_a_zero_budget_stops_every_call():
    assert overspent(TokenBudgets(tokens_per_hour=0), {}, NOW) is not None
