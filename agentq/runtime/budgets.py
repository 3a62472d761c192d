"""The budget check (tokens, then money) every model call of a step makes before it goes out.

It runs under the step's claim and reads the running totals that every worker's commits
add to (agentq.store.budget_totals), so a budget holds across all workers. It reserves
nothing: calls that were already running when a budget ran out still commit, so a budget
may be overspent by at most the tokens of the calls in flight at that moment (each up to
its request plus its `max_tokens`), and no call starts after their commits reach it.
A model step's check also asks a person past a soft threshold (agentq.core.budget_asks).
"""
from __future__ import annotations

from agentq.core.budget_asks import decision, expired, soft_message, soft_reached
from agentq.core.decide import current_turn
from agentq.core.events import View
from agentq.core.token_budgets import Overspent, TokenBudgets, checks, overspent
from agentq.providers.errors import BudgetAsks, BudgetExceeded, BudgetWaits
from agentq.runtime.context import StepContext
from agentq.store.budget_totals import Spent


def within_budget(ctx: StepContext, view: View, *, ask: bool = False) -> None:
    """Nothing if the conversation's tenant, agent and own budgets have room; else
    BudgetWaits (the operator's `on_exceeded = "wait"`, for a budget that resets) or
    BudgetExceeded (the turn fails, its `error` event saying which budget and when it
    resets). With `ask` (a model step's check), past a soft threshold: BudgetAsks if no
    person decided in this turn yet, BudgetExceeded if one said no."""
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
    if over is not None:
        waits = budgets.on_exceeded == "wait" and over.until is not None
        details = {**over.details(view.tenant, spent.agent, view.conversation_id),
                   "on_exceeded": "wait" if waits else "fail"}
        if waits:
            raise BudgetWaits(over.message(), until=over.until, details=details)
        raise BudgetExceeded(over.message(), details=details)
    if ask and budgets.ask_at_percent is not None:
        _ask_past_soft_threshold(ctx, view, budgets, spent)


def _ask_past_soft_threshold(ctx: StepContext, view: View, budgets: TokenBudgets,
                             spent: Spent) -> None:
    """BudgetAsks past `ask_at_percent` of a budget, unless a person decided in this turn;
    BudgetExceeded if they said no."""
    turn, turn_id = current_turn(view.events), view.fsm.turn_id or ""
    decided = decision(turn, turn_id)
    if decided is True:
        return  # a person said go on: up to the hard limits
    percent = budgets.ask_at_percent or 100
    soft = _first_reached(ctx, view, budgets, spent, percent)
    if decided is False:  # the budget they were asked about (or, reset since, the first)
        said_no = soft or _first_reached(ctx, view, budgets, spent, 0)
        details = ({"tenant": view.tenant, "conversation_id": view.conversation_id}
                   if said_no is None else said_no.details(view.tenant, spent.agent,
                                                           view.conversation_id))
        why = ("no one answered whether this turn may spend past its budget's soft threshold "
               "before the question expired: nobody attends a schedule's run"
               if expired(turn, turn_id) else
               "a person declined to let this turn spend past its budget's soft threshold")
        raise BudgetExceeded(why, details={**details, "on_exceeded": "fail"})
    if soft is not None:
        raise BudgetAsks(soft_message(soft, percent), details={
            **soft.details(view.tenant, spent.agent, view.conversation_id),
            "ask_at_percent": percent})


def _first_reached(ctx: StepContext, view: View, budgets: TokenBudgets, spent: Spent,
                   percent: int) -> Overspent | None:
    now, cid = ctx.clock(), view.conversation_id
    return (soft_reached(checks(budgets, spent.agent, cid, now), spent.totals, now, percent)
            or soft_reached(checks(budgets, spent.agent, cid, now, unit="cost"), spent.costs,
                            now, percent, unit="cost"))
