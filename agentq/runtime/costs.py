"""What a model step counts when it commits: its call's tokens, their cost at the prices in
force (the operator's policy, asked at the commit), and the turn they belong to.

The cost is written three ways from one number: in the assistant_msg (`cost_nanos`, what a
turn's timeline reads per call), in the usage rollups and the budgets' totals, and in the
turn's row (agentq.store.turn_usage), all in the commit's one transaction.
"""
from __future__ import annotations

from datetime import datetime

from agentq.core.events import View
from agentq.core.usage import Tokens
from agentq.runtime.context import StepContext
from agentq.store.step_commit import Counted, counted
from agentq.store.turn_usage import TurnRef
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
    profile, its agent, its turn)."""
    key = usage_key(view.conversation_id, tenant=view.tenant, settings=view.settings,
                    agent=view.agent, parent=view.parent, model=view.settings.model)
    return counted(key, tokens, now=now, cost_nanos=cost_nanos or 0, turn=turn_of(view, now))
