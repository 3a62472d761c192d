"""Budgets: how many tokens, and how much money, a tenant, one of its agents, or one
conversation may spend.

The operator's policy sets them (agentq.tenancy.policy: `[budgets]`, `[tenants.X.budgets]`,
`… .agents.NAME`): a tenant's and an agent's per UTC hour, day or month, a conversation's
over its whole life. Every committed model call adds its tokens to running totals, one per
`Meter` (agentq.store.usage), and the model step reads those of its call before it goes out
(agentq.runtime.budgets). A money budget (`cost_per_…`, in nanos: agentq.core.prices)
reads the same meters' cost beside their tokens. Pure: meters, periods and the comparison.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from agentq.core.prices import format_money
from agentq.core.timefmt import format_ts
from agentq.core.usage import day_of, hour_of

PERIODS = ("hour", "day", "month")
WHOLE = "life"  # the period of a conversation's total: it never resets
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)  # the start of every WHOLE period
OnExceeded = Literal["fail", "wait"]
Unit = Literal["tokens", "cost"]  # what a budget counts: tokens, or money in nanos


@dataclass(frozen=True)
class PeriodBudgets:
    """Tokens (input + output) that may be spent per period; None is no budget."""

    tokens_per_hour: int | None = None
    tokens_per_day: int | None = None
    tokens_per_month: int | None = None
    cost_per_hour: int | None = None  # nanos (agentq.core.prices)
    cost_per_day: int | None = None
    cost_per_month: int | None = None

    def limits(self) -> dict[str, int]:
        """The periods that have a token budget, and their budgets."""
        found = {"hour": self.tokens_per_hour, "day": self.tokens_per_day,
                 "month": self.tokens_per_month}
        return {period: limit for period, limit in found.items() if limit is not None}

    def cost_limits(self) -> dict[str, int]:
        """The periods that have a money budget, and their budgets in nanos."""
        found = {"hour": self.cost_per_hour, "day": self.cost_per_day,
                 "month": self.cost_per_month}
        return {period: limit for period, limit in found.items() if limit is not None}


@dataclass(frozen=True)
class TokenBudgets(PeriodBudgets):
    """Everything budgeted for one tenant: its own periods, each agent's, each conversation's
    whole life, and what a turn past one does (`fail`, or `wait` for the period to reset)."""

    tokens_per_conversation: int | None = None
    agents: Mapping[str, PeriodBudgets] = field(default_factory=dict)
    on_exceeded: OnExceeded = "fail"
    cost_per_conversation: int | None = None  # nanos over the conversation's life
    # past this share of any budget a turn asks a person first (agentq.core.budget_asks)
    ask_at_percent: int | None = None

    def any(self) -> bool:
        """Whether anything is budgeted (else no check reads anything)."""
        return bool(self.limits() or self.cost_limits()
                    or self.tokens_per_conversation is not None
                    or self.cost_per_conversation is not None
                    or any(b.limits() or b.cost_limits() for b in self.agents.values()))


@dataclass(frozen=True)
class Meter:
    """One running total of a tenant's tokens: whose (`scope` tenant, agent or conversation,
    `name` the agent's name or the conversation's id, "" for the tenant) over which period."""

    scope: str
    name: str
    period: str
    start: datetime  # the start of the period the total counts (EPOCH for WHOLE)


def meters_of(agent: str | None, conversation_id: str, at: datetime) -> list[Meter]:
    """The totals a call committed at `at` adds to: the tenant's and its agent's per period,
    and its conversation's."""
    found = [Meter("tenant", "", p, period_start(p, at)) for p in PERIODS]
    if agent:
        found += [Meter("agent", agent, p, period_start(p, at)) for p in PERIODS]
    return found + [Meter("conversation", conversation_id, WHOLE, EPOCH)]


def checks(budgets: TokenBudgets, agent: str | None, conversation_id: str, now: datetime,
           *, unit: Unit = "tokens") -> list[tuple[Meter, int]]:
    """The totals a call about to start must be under, each with its budget, tenant first:
    of tokens, or (`unit` "cost") of money."""
    def limits(of: PeriodBudgets) -> dict[str, int]:
        return of.limits() if unit == "tokens" else of.cost_limits()

    found = [(Meter("tenant", "", p, period_start(p, now)), limit)
             for p, limit in limits(budgets).items()]
    own = budgets.agents.get(agent) if agent else None
    if own is not None and agent:
        found += [(Meter("agent", agent, p, period_start(p, now)), limit)
                  for p, limit in limits(own).items()]
    whole = (budgets.tokens_per_conversation if unit == "tokens"
             else budgets.cost_per_conversation)
    if whole is not None:
        found.append((Meter("conversation", conversation_id, WHOLE, EPOCH), whole))
    return found


@dataclass(frozen=True)
class Overspent:
    """A budget that is used up: no model call starts before `until` (None: never again)."""

    scope: str
    name: str
    period: str
    limit: int
    spent: int
    until: datetime | None
    unit: Unit = "tokens"  # "cost": `limit` and `spent` are nanos

    def message(self) -> str:
        whose = {"tenant": "", "agent": f" of agent {self.name!r}",
                 "conversation": " of this conversation"}[self.scope]
        span = "" if self.period == WHOLE else f" this {self.period}"
        resets = ("; it does not reset" if self.until is None
                  else f"; it resets at {format_ts(self.until)}")
        if self.unit == "cost":
            return (f"the money budget{whose}{span} is spent ({format_money(self.spent)} of "
                    f"{format_money(self.limit)}){resets}")
        return (f"the token budget{whose}{span} is spent ({self.spent} of {self.limit} "
                f"tokens){resets}")

    def details(self, tenant: str, agent: str | None, conversation_id: str) -> dict[str, Any]:
        """What the error event, the retry notice and the `budget.exceeded` webhook say (a
        money budget's amounts as decimal text)."""
        amount: Any = format_money if self.unit == "cost" else int
        return {"tenant": tenant, "scope": self.scope, "period": self.period,
                "limit": amount(self.limit), "spent": amount(self.spent),
                "resets_at": None if self.until is None else format_ts(self.until),
                "agent": agent, "conversation_id": conversation_id, "unit": self.unit}


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


def overspent(budgeted: Sequence[tuple[Meter, int]], spent: Mapping[Meter, int], now: datetime,
              *, unit: Unit = "tokens") -> Overspent | None:
    """The first budget whose total reached it, if any; a period that cannot reset (a
    conversation's) comes before those that can, so a waiting turn never waits for nothing."""
    over = [Overspent(meter.scope, meter.name, meter.period, limit, spent.get(meter, 0),
                      None if meter.period == WHOLE else period_end(meter.period, now), unit)
            for meter, limit in budgeted if spent.get(meter, 0) >= limit]
    if not over:
        return None
    return next((o for o in over if o.until is None), None) or max(over, key=_latest)


def _latest(over: Overspent) -> datetime:
    """Of several spent budgets a turn waits for the one that resets last."""
    return over.until or EPOCH
