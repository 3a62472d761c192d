"""Guardrails that are agents, in the model step: one model call each, for a verdict.

The agent is found as a sub-agent's is (agentq.runtime.children.find_agent): the tenant's
own of the name, else the operator's code agent the rules offer it, its settings admitted
for the tenant now. Its model is called through the worker's model calls (retries, the
endpoint's breaker, the time limit of the agent's settings) with the verdict's request
(agentq.core.guardrail_agents), under the model step's claim and with the guardrail run's
own step key. What the call spent is kept beside the verdict: the step's one commit counts
it in the usage, the budgets and the turn's row, under the guardrail agent's name.

A call that fails for good (or passes its time limit) trips, as a function guardrail that
raises does; one that must wait for a slot or a budget answer holds the step, which runs
its guardrails again when it is let through.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from agentq.core.agents import AgentRef
from agentq.core.events import View
from agentq.core.guardrail_agents import parse_verdict, verdict_request, verdict_settings
from agentq.core.guardrails import Phase, Verdict
from agentq.core.settings import GUARDRAIL_AGENT_PREFIX, Settings
from agentq.core.usage import Tokens
from agentq.providers.base import CallContext
from agentq.providers.errors import CallWaits, ProviderError
from agentq.runtime.children import find_agent
from agentq.runtime.context import StepContext
from agentq.runtime.model_call import ModelCalls, RoundInfo, StepTimedOut

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgentCall:
    """What one guardrail agent's model call spent, and whose it was."""

    agent: AgentRef
    settings: Settings  # as the call was made: its profile and model are where it counts
    usage: dict[str, Any]
    cost_nanos: int | None  # None: its model is unpriced

    @property
    def tokens(self) -> Tokens:
        return Tokens.of_call(self.usage)

    def record(self) -> dict[str, Any]:
        """What the verdict's event shows of the call: the agent, its tokens, its cost."""
        out: dict[str, Any] = {"agent": self.agent.to_json(), "usage": self.usage}
        if self.cost_nanos is not None:
            out["cost_nanos"] = self.cost_nanos
        return out


class GuardrailAgents:
    """Runs the guardrail agents of one model step (the step's view, the claim's attempt)."""

    def __init__(self, ctx: StepContext, calls: ModelCalls, view: View, attempt: int) -> None:
        self.ctx = ctx
        self.calls = calls
        self.view = view
        self.attempt = attempt

    def run(self, name: str, phase: Phase, text: str, key: str, cancel: threading.Event
            ) -> tuple[Verdict, AgentCall | None]:
        """The agent's verdict on `text`, and what its call spent (None: no call was made).
        An agent the tenant may not use, or a call that failed, trips."""
        label = GUARDRAIL_AGENT_PREFIX + name
        view = self.view
        found = find_agent(self.ctx.store, self.ctx.rules, view.tenant, name)
        if isinstance(found, str):
            return Verdict(label, phase, True, {"error": found}), None
        settings = verdict_settings(found.settings)
        info = RoundInfo(view.conversation_id, view.fsm.turn_id, None, key)
        call_ctx = CallContext(conversation_id=view.conversation_id, step_key=key, round_id=None,
                               attempt=self.attempt, rounds_committed=0, settings=settings)
        call = self.calls.start(settings, info, deltas=False)
        try:
            response = call.run(verdict_request(settings, phase, text), call_ctx, info, cancel,
                                timeout_s=settings.limits.llm_timeout_s)
        except CallWaits:
            raise  # the step holds, and runs its guardrails again later
        except (ProviderError, StepTimedOut) as exc:
            log.warning("guardrail agent %s could not answer: %s", name, exc,
                        extra={"guardrail": label})
            return Verdict(label, phase, True, {"error": f"{type(exc).__name__}: {exc}"}), None
        prices = self.ctx.rules.prices_for(settings)
        tokens = Tokens.of_call(response.usage)
        spent = AgentCall(found.ref, settings, dict(response.usage),
                          None if prices is None else prices.cost_of(tokens))
        return parse_verdict(label, phase, response.text), spent
