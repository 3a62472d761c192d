"""The budget check (tokens, then money) every model call of a step makes before it goes out.

It runs under the step's claim and reads the running totals that every worker's commits
add to (agentq.store.budget_totals), so a budget holds across all workers. It reserves
nothing: calls that were already running when a budget ran out still commit, so a budget
may be overspent by at most the tokens of the calls in flight at that moment (each up to
its request plus its `max_tokens`), and no call starts after their commits reach it.
"""
from __future__ import annotations

from agentq.core.events import View
from agentq.core.token_budgets import checks, overspent
from agentq.providers.errors import BudgetExceeded, BudgetWaits
from agentq.runtime.context import StepContext


def within_budget(ctx: StepContext, view: View) -> None:
    """Nothing if the conversation's tenant, agent and own budgets have room; else
    BudgetWaits (the operator's `on_exceeded = "wait"`, for a budget that resets) or
    BudgetExceeded (the turn fails, its `error` event saying which budget and when it
    resets)."""
    budgets = ctx.rules.budgets_for(view.tenant)
    if not budgets.any():
        return
    spent = ctx.store.usage.load_spent(view.conversation_id)
    if spent is None:
        return  # the conversation is gone: the step's commit finds out
    now = ctx.clock()
    over = (overspent(checks(budgets, spent.agent, view.conversation_id, now), spent.totals, now)
            or overspent(checks(budgets, spent.agent, view.conversation_id, now, unit="cost"),
                         spent.costs, now, unit="cost"))
    if over is None:
        return
    waits = budgets.on_exceeded == "wait" and over.until is not None
    details = {**over.details(view.tenant, spent.agent, view.conversation_id),
               "on_exceeded": "wait" if waits else "fail"}
    if waits:
        raise BudgetWaits(over.message(), until=over.until, details=details)
    raise BudgetExceeded(over.message(), details=details)
