"""Which agents a tenant may use: its own, and those defined in code that the policy offers it.

A tenant's own agent of a name hides a code agent of the same name (a tenant cannot
create one while the code agent is offered to it, but an operator may offer it later);
another tenant's agents are as if they did not exist. A code agent is offered while the
process's code defines it: one removed from the code is not started any more, and the
conversations started from it keep the settings they were created with.

The code's agents are published once, before the first read (or at once, `published`):
an API process that starts while its database is down starts all the same, and
publishes when the database is back.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime

from agentq.agents.code import CodeAgents
from agentq.core.agents import AgentVersion
from agentq.process.clock import utcnow
from agentq.store import Store
from agentq.store.agents import CODE_OWNER


class Catalog:
    """The agents of each tenant, read from the store."""

    def __init__(self, store: Store, offers: Callable[[str, str], bool],
                 code: CodeAgents | None = None, *, clock: Callable[[], datetime] = utcnow
                 ) -> None:
        self.store = store
        self._offers = offers  # Policy.offers_agent: (name, tenant) -> bool
        self._code = code or CodeAgents([])
        self._clock = clock
        self._unpublished = bool(self._code.names)
        self._publishing = threading.Lock()

    @classmethod
    def published(cls, store: Store, offers: Callable[[str, str], bool], code: CodeAgents,
                  *, now: datetime) -> Catalog:
        """The catalog of a process that starts, once it published the agents its code
        defines (those whose definition changed since their latest version)."""
        catalog = cls(store, offers, code)
        catalog.publish(now=now)
        return catalog

    def publish(self, *, now: datetime) -> None:
        """Publish the code's agents whose definition changed; once per process."""
        with self._publishing:
            if self._unpublished:
                self._code.publish(self.store, now=now)
                self._unpublished = False

    def _ready(self) -> None:
        if self._unpublished:
            self.publish(now=self._clock())

    def offered_in_code(self, name: str, tenant: str) -> bool:
        """Whether the code defines an agent `name` and the policy offers it to `tenant`."""
        return name in self._code.names and self._offers(name, tenant)

    def find(self, tenant: str, name: str, *, version: int | None = None) -> AgentVersion | None:
        """Version `version` (the latest when None) of the agent `name` as `tenant` sees it."""
        owner, latest = self._latest(tenant, name)
        if latest is None or version is None or version == latest.version:
            return latest
        return self.store.agents.load_version(owner, name, version=version)

    def versions(self, tenant: str, name: str, *, after_version: int = 0,
                 limit: int | None = None) -> list[AgentVersion] | None:
        """The versions of the agent `name` as `tenant` sees it, oldest first; None if none."""
        owner, latest = self._latest(tenant, name)
        if latest is None:
            return None
        return self.store.agents.list_versions(owner, name, after_version=after_version, limit=limit)

    def _latest(self, tenant: str, name: str) -> tuple[str, AgentVersion | None]:
        """Whose agent `name` is, for `tenant`, and its latest version."""
        self._ready()
        latest = self.store.agents.load_version(tenant, name)
        if latest is None and self.offered_in_code(name, tenant):
            return CODE_OWNER, self.store.agents.load_version(CODE_OWNER, name)
        return tenant, latest

    def list(self, tenant: str, *, after_name: str | None = None, limit: int | None = None
             ) -> list[AgentVersion]:
        """The latest version of every agent `tenant` may use, by name, the page after
        `after_name`.

        Careful: a code agent is hidden by the tenant's own of its name; the tenant's
        page holds every name up to its last, so a code agent it lets through is either
        not hidden or past the page.
        """
        self._ready()
        own = self.store.agents.list_latest(tenant, after_name=after_name, limit=limit)
        mine = {item.name for item in own}
        code = [item for item in self.store.agents.list_latest(CODE_OWNER, after_name=after_name)
                if item.name not in mine and self.offered_in_code(item.name, tenant)]
        return sorted(own + code, key=lambda item: item.name)[:limit]
