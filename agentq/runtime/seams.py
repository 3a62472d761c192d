"""The two seams a step is wired through: the tenant rules it consults, and what it announces.

A step asks the operator's rules (agentq.tenancy.rules: the policy and its model profiles)
which provider and endpoint a conversation's calls use, how many of a tenant's steps may run
at once, its token budgets and ceilings; and it tells live streams (agentq.live.announcer)
of the deltas and retries of its round and of the events it appended. Each is one object
with named methods, so a reader (or a tool) follows a call to its definition; tests hand in
`NoPolicy` or a fake of their own. `agentq.worker.wiring` picks the real ones.
"""
from __future__ import annotations

from typing import Protocol

from agentq.core.ceilings import Ceilings
from agentq.core.handoffs import CodeInputFilter
from agentq.core.prices import Prices
from agentq.core.settings import Settings
from agentq.core.token_budgets import TokenBudgets
from agentq.providers.base import Provider
from agentq.tenancy.access import provider_for


class TenantRules(Protocol):
    """What the operator allows a tenant's steps: asked at each step, never cached here."""

    def provider_for(self, settings: Settings) -> Provider:
        """The provider a conversation with these settings calls."""
        ...

    def endpoint_url(self, settings: Settings) -> str | None:
        """The endpoint (base URL) the conversation's calls go to, which its circuit breaker
        is kept by; None: no breaker for it."""
        ...

    def running_steps(self, tenant: str) -> int | None:
        """How many of `tenant`'s steps may run at once on all workers (None: the default
        share of `queue_of`'s workers, or no cap)."""
        ...

    def queue_of(self, kind: str, tool: str | None) -> str | None:
        """The queue a step's task goes to, by kind and tool; a tenant's default share is of
        the slots that queue's workers offer (None: not known, no default share)."""
        ...

    def budgets_for(self, tenant: str) -> TokenBudgets:
        """`tenant`'s token budgets: checked before each model call."""
        ...

    def ceilings_for(self, tenant: str) -> Ceilings:
        """`tenant`'s ceilings: how deep sub-agents nest, how many a turn starts."""
        ...

    def offers_agent(self, name: str, tenant: str) -> bool:
        """Whether the code's agent `name` may run as a child of `tenant`'s conversations."""
        ...

    def settings_for(self, settings: Settings, tenant: str, *, from_code: bool = False
                     ) -> Settings:
        """A child's settings as admitted for `tenant` (or InvalidInput saying why not)."""
        ...

    def input_filter(self, name: str) -> CodeInputFilter | None:
        """The handoff input filter of the operator's code of this name, if it defines one."""
        ...

    def prices_for(self, settings: Settings) -> Prices | None:
        """What a call with these settings costs per token (None: not priced, it costs 0)."""
        ...


class NoPolicy:
    """The rules without an operator's policy: the built-in providers, no breaker, no cap,
    no budgets, the default ceilings, every code agent offered and its settings as stored."""

    def provider_for(self, settings: Settings) -> Provider:
        return provider_for(settings)

    def endpoint_url(self, settings: Settings) -> str | None:
        return None

    def running_steps(self, tenant: str) -> int | None:
        return None

    def queue_of(self, kind: str, tool: str | None) -> str | None:
        return None

    def budgets_for(self, tenant: str) -> TokenBudgets:
        return TokenBudgets()

    def ceilings_for(self, tenant: str) -> Ceilings:
        return Ceilings()

    def offers_agent(self, name: str, tenant: str) -> bool:
        return True

    def settings_for(self, settings: Settings, tenant: str, *, from_code: bool = False
                     ) -> Settings:
        return settings

    def input_filter(self, name: str) -> CodeInputFilter | None:
        return None

    def prices_for(self, settings: Settings) -> Prices | None:
        return None


class RoundAnnouncer(Protocol):
    """What one round tells live streams while its model call runs (inv. 6: every notice
    carries this round's id, never a conversation-wide "current round")."""

    def delta(self, attempt: int, index: int, text: str) -> object:
        """A piece of the answer: delta `index` (0 starts the round's text afresh) of `attempt`."""
        ...

    def retry(self, attempt: int | None, error: str, next_delay_s: float, *, transient: bool,
              until: str | None = None, **why: object) -> object:
        """The call failed or is held (`attempt` None) and goes again in `next_delay_s`."""
        ...


class Announcer(Protocol):
    """Where a step's news goes: live streams, best effort (the log is the record)."""

    def round(self, conversation_id: str, *, turn_id: str | None, round_id: str | None
              ) -> RoundAnnouncer:
        """The announcer of one round of the conversation (round None: a summary's call)."""
        ...

    def new_events(self, conversation_id: str, last_seq: int | None) -> object:
        """Events through `last_seq` are in the log (None: some, the API does not say which)."""
        ...
