"""Tenant rules a test sets piece by piece (the runtime's `TenantRules`); what it leaves out
is `NoPolicy`'s: the built-in providers, no breaker, no caps, no budgets."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentq.core.ceilings import Ceilings
from agentq.core.prices import Prices
from agentq.core.settings import Settings
from agentq.core.token_budgets import TokenBudgets
from agentq.providers.base import Provider
from agentq.runtime.seams import NoPolicy


@dataclass
class Rules(NoPolicy):
    providers: Callable[[Settings], Provider] | None = None
    endpoints: Callable[[Settings], str | None] | None = None
    running: Callable[[str], int | None] | None = None  # tenant -> running steps
    queues: Callable[[str, str | None], str | None] | None = None  # (kind, tool) -> queue
    budgets: Callable[[str], TokenBudgets] | None = None
    ceilings: Callable[[str], Ceilings] | None = None
    policy: Any = None  # offers the code's agents and admits a child's settings
    filters: dict[str, Any] | None = None  # the code's handoff input filters, by name
    prices: Callable[[Settings], Prices | None] | None = None

    def provider_for(self, settings: Settings) -> Provider:
        return super().provider_for(settings) if self.providers is None else self.providers(settings)

    def endpoint_url(self, settings: Settings) -> str | None:
        return None if self.endpoints is None else self.endpoints(settings)

    def running_steps(self, tenant: str) -> int | None:
        return None if self.running is None else self.running(tenant)

    def queue_of(self, kind: str, tool: str | None) -> str | None:
        return None if self.queues is None else self.queues(kind, tool)

    def budgets_for(self, tenant: str) -> TokenBudgets:
        if self.budgets is not None:
            return self.budgets(tenant)
        return super().budgets_for(tenant) if self.policy is None else self.policy.budgets_for(tenant)

    def ceilings_for(self, tenant: str) -> Ceilings:
        return super().ceilings_for(tenant) if self.ceilings is None else self.ceilings(tenant)

    def offers_agent(self, name: str, tenant: str) -> bool:
        return self.policy is None or self.policy.offers_agent(name, tenant)

    def settings_for(self, settings: Settings, tenant: str, *, from_code: bool = False
                     ) -> Settings:
        if self.policy is None:
            return settings
        return self.policy.settings_for(settings, tenant, from_code=from_code)

    def input_filter(self, name: str) -> Any:
        return (self.filters or {}).get(name)

    def prices_for(self, settings: Settings) -> Prices | None:
        if self.prices is not None:
            return self.prices(settings)
        return super().prices_for(settings) if self.policy is None else self.policy.prices_for(settings)
