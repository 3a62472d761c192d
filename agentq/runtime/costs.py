"""What a model step counts when it commits: its call's tokens, their cost at the prices in
force (the operator's policy, asked at the commit), and the turn they belong to.

The cost is written three ways from one number: in the assistant_msg (`cost_nanos`, what a
turn's timeline reads per call), in the usage rollups and the budgets' totals, and in the
turn's row (agentq.store.turn_usage), all in the commit's one transaction.
"""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from agentq.core.agents import AgentRef
from agentq.core.events import View
from agentq.core.handoffs import holder_ref
from agentq.core.settings import Settings
from agentq.core.usage import Tokens
from agentq.runtime.context import StepContext
from agentq.store.step_commit import Counted, counted
from agentq.store.turn_usage import TurnRef, turn_values
from agentq.store.usage import usage_key


def cost_in_force(ctx: StepContext, view: View, tokens: Tokens) -> int | None:
    """What `tokens` of the view's model cost now, in nanos; None: the model is unpriced."""
    prices = ctx.rules.prices_for(view.settings)
    return None if prices is None else prices.cost_of(tokens)


def turn_of(view: View, now: datetime) -> TurnRef | None:
    """The view's current turn, started at its user_msg: found walking back from the view's
    end, so a long conversation costs only its last turn (`now` if a summary stands for it)."""
    turn_id = view.fsm.turn_id
    if not turn_id:
        return None
    started = now
    for event in reversed(view.events):
        if event.seq < view.fsm.turn_seq:
            break
        if event.turn_id == turn_id:
            started = event.created_at
        if event.type == "user_msg" and event.turn_id == turn_id:
            break
    return TurnRef(turn_id, started)


def counted_call(view: View, tokens: Tokens, cost_nanos: int | None, now: datetime) -> Counted:
    """A call's tokens and cost, counted where the view the model was called with says (its
    profile, the agent holding the conversation after any handoff, its turn)."""
    key = usage_key(view.conversation_id, tenant=view.tenant, settings=view.settings,
                    agent=holder_ref(view.fsm, view.agent), parent=view.parent,
                    model=view.settings.model)
    return counted(key, tokens, now=now, cost_nanos=cost_nanos or 0, turn=turn_of(view, now))


def counted_guardrail_call(view: View, agent: AgentRef, settings: Settings, tokens: Tokens,
                           cost_nanos: int | None, now: datetime) -> Counted:
    """A guardrail agent's call, counted under that agent (its profile and model) in the
    rollups and the budgets' totals, and in the turn's row of the conversation it checked."""
    key = usage_key(view.conversation_id, tenant=view.tenant, settings=settings, agent=agent,
                    parent=view.parent, model=settings.model)
    found = counted(key, tokens, now=now, cost_nanos=cost_nanos or 0)
    turn = turn_of(view, now)
    if turn is None:
        return found
    holder = usage_key(view.conversation_id, tenant=view.tenant, settings=view.settings,
                       agent=holder_ref(view.fsm, view.agent), parent=view.parent,
                       model=view.settings.model)
    return replace(found, turn=turn_values(holder, turn, tokens, cost_nanos or 0, at=now))
