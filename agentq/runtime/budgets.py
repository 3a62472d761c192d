"""The token-budget check every model call of a step makes before it goes out."""
from __future__ import annotations

from agentq.core.token_budgets import overspent, period_start
from agentq.providers.errors import BudgetExceeded
from agentq.runtime.context import StepContext


def within_budget(ctx: StepContext, tenant: str) -> None:
    """BudgetExceeded (the turn fails, its `error` event saying which budget and when it
    resets) if `tenant` spent a period's token budget, read from the usage rollups that every
    worker's commits add to. Calls already running when the budget ran out still commit:
    each may overspend by its own tokens."""
    budgets = ctx.budgets(tenant)
    limits = budgets.limits()
    if not limits:
        return
    now = ctx.clock()
    spent = ctx.store.spent_since(tenant, {period: period_start(period, now) for period in limits})
    over = overspent(budgets, spent, now)
    if over is not None:
        raise BudgetExceeded(over.message())
