"""What a tenant can do to its agents: create one, publish a new version, read them.

Each version's settings are admitted as a conversation's would be (the tools exist, the
profile is open to the tenant, the model on offer, every number under its ceiling), so
an agent that is stored can start a conversation; they are admitted again when one does,
since the policy may have changed meanwhile.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from agentq.core.agents import AgentDefinition, AgentVersion
from agentq.core.scope import Scope
from agentq.core.settings import Settings
from agentq.errors import Conflict, InvalidInput, NotFound

if TYPE_CHECKING:
    from agentq.commands.conversations import Commands

MAX_AGENTS_PER_TENANT = 1000


class AgentCommands:
    """Entry calls on a tenant's agents, over the conversation `Commands`' store and policy."""

    def __init__(self, commands: Commands, *, max_agents: int = MAX_AGENTS_PER_TENANT) -> None:
        self.commands = commands  # its catalog, clock and admission of settings
        self.max_agents = max_agents

    def create_agent(self, scope: Scope, definition: AgentDefinition) -> AgentVersion:
        """Version 1 of a new agent of the tenant; Conflict if the name is taken."""
        catalog, tenant = self.commands.catalog, scope.tenant
        if catalog.offered_in_code(definition.name, tenant):
            raise Conflict(f"agent {definition.name!r} is defined by the operator; "
                           "choose another name", code="agent_exists")
        if catalog.store.agents.count(tenant) >= self.max_agents:
            raise Conflict(f"a tenant has at most {self.max_agents} agents",
                           code="too_many_agents")
        self._check_settings(definition, scope)
        created = catalog.store.agents.create(tenant, definition, now=self.commands.clock())
        if created is None:
            raise Conflict(f"agent {definition.name!r} exists; publish a new version with "
                           f"POST /v1/agents/{definition.name}/versions", code="agent_exists")
        return created

    def add_version(self, scope: Scope, definition: AgentDefinition) -> AgentVersion:
        """The next, immutable version of one of the tenant's agents."""
        catalog, tenant = self.commands.catalog, scope.tenant
        if catalog.store.agents.load_version(tenant, definition.name) is None:
            if catalog.offered_in_code(definition.name, tenant):
                raise Conflict(f"agent {definition.name!r} is defined by the operator's code; "
                               "its versions come from there", code="agent_in_code")
            raise NotFound(f"no agent {definition.name}")
        self._check_settings(definition, scope)
        added = catalog.store.agents.add_version(tenant, definition, now=self.commands.clock())
        if added is None:  # the agent was there a moment ago; agents are never deleted
            raise NotFound(f"no agent {definition.name}")
        return added

    def agent(self, scope: Scope, name: str, *, version: int | None = None) -> AgentVersion:
        """The version (the latest when None) of an agent the tenant may use, or NotFound."""
        found = self.commands.catalog.find(scope.tenant, name, version=version)
        if found is None:
            which = name if version is None else f"{name} version {version}"
            raise NotFound(f"no agent {which}")
        return found

    def versions(self, scope: Scope, name: str, *, after_version: int = 0,
                 limit: int | None = None) -> list[AgentVersion]:
        """The versions of an agent the tenant may use, oldest first, or NotFound."""
        found = self.commands.catalog.versions(scope.tenant, name, after_version=after_version,
                                               limit=limit)
        if found is None:
            raise NotFound(f"no agent {name}")
        return found

    def agents(self, scope: Scope, *, after_name: str | None = None, limit: int | None = None
               ) -> list[AgentVersion]:
        """The latest version of each agent the tenant may use, by name, a page at a time."""
        return self.commands.catalog.list(scope.tenant, after_name=after_name, limit=limit)

    def _check_settings(self, definition: AgentDefinition, scope: Scope) -> Settings:
        try:
            return self.commands.settings_for(definition.settings, scope, defining=definition.name)
        except InvalidInput as exc:
            raise InvalidInput(f"the agent's settings are refused: {exc}", code=exc.code,
                               details=exc.details) from None
