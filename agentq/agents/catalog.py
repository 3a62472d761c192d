"""Which agents a tenant may use: its own, and those defined in code that the policy offers it.

A tenant's own agent of a name hides a code agent of the same name (a tenant cannot
create one while the code agent is offered to it, but an operator may offer it later);
another tenant's agents are as if they did not exist. A code agent is offered while the
process's code defines it: one removed from the code is not started any more, and the
conversations started from it keep the settings they were created with.
"""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from agentq.agents.code import CodeAgents
from agentq.core.agents import AgentVersion
from agentq.store import Store
from agentq.store.agents import CODE_OWNER


class Catalog:
    """The agents of each tenant, read from the store."""

    def __init__(self, store: Store, offers: Callable[[str, str], bool],
                 code_names: frozenset[str] = frozenset()) -> None:
        self.store = store
        self._offers = offers  # Policy.offers_agent: (name, tenant) -> bool
        self.code_names = code_names

    @classmethod
    def published(cls, store: Store, offers: Callable[[str, str], bool], agents: CodeAgents,
                  *, now: datetime) -> Catalog:
        """The catalog of a process that starts, once it published the agents its code
        defines (those whose definition changed since their latest version)."""
        agents.publish(store, now=now)
        return cls(store, offers, agents.names)

    def offered_in_code(self, name: str, tenant: str) -> bool:
        """Whether the code defines an agent `name` and the policy offers it to `tenant`."""
        return name in self.code_names and self._offers(name, tenant)

    def find(self, tenant: str, name: str, *, version: int | None = None) -> AgentVersion | None:
        """Version `version` (the latest when None) of the agent `name` as `tenant` sees it."""
        owner = tenant
        latest = self.store.load_agent_version(tenant, name)
        if latest is None and self.offered_in_code(name, tenant):
            owner, latest = CODE_OWNER, self.store.load_agent_version(CODE_OWNER, name)
        if latest is None or version is None or version == latest.version:
            return latest
        return self.store.load_agent_version(owner, name, version=version)

    def list(self, tenant: str) -> list[AgentVersion]:
        """The latest version of every agent `tenant` may use, by name."""
        own = self.store.list_agents(tenant)
        mine = {item.name for item in own}
        code = [item for item in self.store.list_agents(CODE_OWNER)
                if item.name not in mine and self.offered_in_code(item.name, tenant)]
        return sorted(own + code, key=lambda item: item.name)
