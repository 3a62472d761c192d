"""Token budgets: how many tokens a tenant may spend per hour, day or month (UTC periods).

The operator's policy sets them (agentq.tenancy.policy: `[budgets]`, `[tenants.X.budgets]`);
the model step reads what the tenant spent in each period from the usage rollups and calls
no model past a budget (agentq.runtime.model_step). Pure: periods and the comparison only.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from agentq.core.usage import day_of, hour_of

PERIODS = ("hour", "day", "month")


@dataclass(frozen=True)
class TokenBudgets:
    """Tokens (input + output) a tenant may spend per period; None is no budget."""

    tokens_per_hour: int | None = None
    tokens_per_day: int | None = None
    tokens_per_month: int | None = None

    def limits(self) -> dict[str, int]:
        """The periods that have a budget, and their budgets."""
        found = {"hour": self.tokens_per_hour, "day": self.tokens_per_day,
                 "month": self.tokens_per_month}
        return {period: limit for period, limit in found.items() if limit is not None}


@dataclass(frozen=True)
class Overspent:
    """A period whose budget is used up: no model call starts before it ends."""

    period: str
    limit: int
    spent: int
    until: datetime  # when the period ends and its budget is fresh

    def message(self) -> str:
        return (f"the token budget of this {self.period} is spent ({self.spent} of "
                f"{self.limit} tokens); it resets at {self.until.isoformat()}")


def period_start(period: str, now: datetime) -> datetime:
    """The start of the UTC hour, day or month `now` is in."""
    if period == "hour":
        return hour_of(now)
    day = day_of(now)
    return day if period == "day" else day.replace(day=1)


def period_end(period: str, now: datetime) -> datetime:
    start = period_start(period, now)
    if period == "month":
        return start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)
    return start + (timedelta(hours=1) if period == "hour" else timedelta(days=1))


def overspent(budgets: TokenBudgets, spent: Mapping[str, int], now: datetime) -> Overspent | None:
    """The first period (hour, day, month) whose spending reached its budget, if any."""
    for period, limit in budgets.limits().items():
        used = spent.get(period, 0)
        if used >= limit:
            return Overspent(period, limit, used, period_end(period, now))
    return None
