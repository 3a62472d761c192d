"""The operator's rules that a tenant's steps consult, as one object (the runtime's
`TenantRules`): which provider and endpoint a conversation's calls use (`ModelAccess`), and
the policy's caps: running steps, token budgets, prices, ceilings, which agents a child may run.

The runtime asks at each step, so a policy file read again takes effect at the next step.
"""
from __future__ import annotations

from collections.abc import Mapping

from agentq.core.ceilings import Ceilings
from agentq.core.handoffs import CodeInputFilter
from agentq.core.prices import Prices
from agentq.core.settings import Settings
from agentq.core.token_budgets import TokenBudgets
from agentq.providers.base import Provider
from agentq.tenancy.access import ModelAccess
from agentq.tenancy.policy import Policy


class PolicyRules:
    """A policy's rules for the runtime, its model calls sent through `access`."""

    def __init__(self, policy: Policy, access: ModelAccess,
                 input_filters: Mapping[str, CodeInputFilter] | None = None) -> None:
        self.policy = policy
        self.access = access
        self.input_filters = dict(input_filters or {})  # the code's, for handoffs

    def provider_for(self, settings: Settings) -> Provider:
        return self.access.provider_for(settings)

    def endpoint_url(self, settings: Settings) -> str | None:
        return self.access.endpoint_url(settings)

    def running_steps(self, tenant: str) -> int | None:
        return self.policy.running_steps(tenant)

    def queue_of(self, kind: str, tool: str | None) -> str | None:
        """Not the policy's to say: a worker's rules name its queues (agentq.worker.wiring)."""
        return None

    def budgets_for(self, tenant: str) -> TokenBudgets:
        return self.policy.budgets_for(tenant)

    def prices_for(self, settings: Settings) -> Prices | None:
        return self.policy.prices_for(settings)

    def ceilings_for(self, tenant: str) -> Ceilings:
        return self.policy.ceilings_for(tenant)

    def offers_agent(self, name: str, tenant: str) -> bool:
        return self.policy.offers_agent(name, tenant)

    def settings_for(self, settings: Settings, tenant: str, *, from_code: bool = False
                     ) -> Settings:
        return self.policy.settings_for(settings, tenant, from_code=from_code)

    def input_filter(self, name: str) -> CodeInputFilter | None:
        return self.input_filters.get(name)
