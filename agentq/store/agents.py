"""Agent versions as the store holds them: one immutable row per version, never updated.

Each write is an insert of the next version number that loses nothing in a race: two
writers that read the same latest version try the same number, the primary key lets one
in, and the other reads again.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, Row, func, select

from agentq.core.agents import AgentDefinition, AgentVersion, Source
from agentq.core.settings import Settings
from agentq.store.dialects import Dialect
from agentq.store.engine import begin_read, begin_write, insert_ignoring
from agentq.store.schema import agent_versions

CODE_OWNER = ""  # the owner of agents defined in code; a tenant's name is never empty
_RACES = 20  # a writer that loses this many races in a row has met something else


class Agents:
    """The agent verbs of `Store`."""

    def __init__(self, engine: Engine, dialect: Dialect) -> None:
        self._engine = engine
        self._dialect = dialect

    def create(self, tenant: str, definition: AgentDefinition, *, now: datetime
               ) -> AgentVersion | None:
        """Version 1 of a new agent of `tenant`; None if it has one of that name already."""
        with begin_write(self._engine) as conn:
            return _insert_txn(conn, tenant, definition, version=1, source="api", now=now)

    def add_version(self, tenant: str, definition: AgentDefinition, *, now: datetime
                    ) -> AgentVersion | None:
        """The next version of `tenant`'s agent; None if it has no agent of that name."""
        for _ in range(_RACES):
            with begin_write(self._engine) as conn:
                latest = _latest_number_txn(conn, tenant, definition.name)
                if latest is None:
                    return None
                added = _insert_txn(conn, tenant, definition, version=latest + 1, source="api",
                                    now=now)
            if added is not None:
                return added
        raise RuntimeError(f"could not add a version of agent {definition.name!r}")

    def publish_code(self, definition: AgentDefinition, *, now: datetime
                     ) -> tuple[AgentVersion, bool]:
        """The latest version of an agent defined in code, and whether this call published it:
        a new version when the definition differs from the latest one, none when it is the same."""
        for _ in range(_RACES):
            with begin_write(self._engine) as conn:
                latest = _load_txn(conn, CODE_OWNER, definition.name, version=None)
                if latest is not None and latest.digest == definition.digest:
                    return latest, False
                number = 1 if latest is None else latest.version + 1
                added = _insert_txn(conn, CODE_OWNER, definition, version=number, source="code",
                                    now=now)
            if added is not None:
                return added, True
        raise RuntimeError(f"could not publish agent {definition.name!r}")

    def load_version(self, tenant: str, name: str, *, version: int | None = None
                     ) -> AgentVersion | None:
        """Version `version` of `tenant`'s agent `name` (the latest when None), or None."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return _load_txn(conn, tenant, name, version=version)

    def list_latest(self, tenant: str, *, after_name: str | None = None, limit: int | None = None
                    ) -> list[AgentVersion]:
        """The latest version of each of `tenant`'s agents, by name, the page after `after_name`."""
        a = agent_versions.c
        inner = agent_versions.alias("newer")
        latest = (select(func.max(inner.c.version))
                  .where(inner.c.tenant == a.tenant, inner.c.name == a.name).scalar_subquery())
        query = (select(agent_versions).where(a.tenant == tenant, a.version == latest)
                 .order_by(a.name).limit(limit))
        if after_name is not None:
            query = query.where(a.name > after_name)
        with begin_read(self._engine, one_snapshot=False) as conn:
            return [_version_from_row(row) for row in conn.execute(query)]

    def list_versions(self, tenant: str, name: str, *, after_version: int = 0,
                      limit: int | None = None) -> list[AgentVersion]:
        """Versions of `tenant`'s agent `name`, oldest first, after `after_version`."""
        a = agent_versions.c
        query = (select(agent_versions)
                 .where(a.tenant == tenant, a.name == name, a.version > after_version)
                 .order_by(a.version).limit(limit))
        with begin_read(self._engine, one_snapshot=False) as conn:
            return [_version_from_row(row) for row in conn.execute(query)]

    def count(self, tenant: str) -> int:
        """How many agents (not versions) `tenant` has."""
        a = agent_versions.c
        query = select(func.count(func.distinct(a.name))).where(a.tenant == tenant)
        with begin_read(self._engine, one_snapshot=False) as conn:
            return int(conn.execute(query).scalar_one())


def _insert_txn(conn: Connection, tenant: str, definition: AgentDefinition, *, version: int,
                source: Source, now: datetime) -> AgentVersion | None:
    """Insert the version unless its number is taken (then None: nothing written)."""
    canonical = definition.canonical()
    row: dict[str, Any] = {
        "tenant": tenant, "name": definition.name, "version": version,
        "digest": definition.digest, "source": source, "description": definition.description,
        "settings": canonical["settings"], "overridable": canonical["overridable"],
        "created_at": now,
    }
    if not conn.execute(insert_ignoring(conn, agent_versions), row).rowcount:
        return None
    return AgentVersion(definition=definition, version=version, digest=row["digest"],
                        source=source, created_at=now)


def _latest_number_txn(conn: Connection, tenant: str, name: str) -> int | None:
    a = agent_versions.c
    return conn.execute(select(func.max(a.version)).where(a.tenant == tenant, a.name == name)
                        ).scalar_one()


def _load_txn(conn: Connection, tenant: str, name: str, *, version: int | None
              ) -> AgentVersion | None:
    a = agent_versions.c
    query = select(agent_versions).where(a.tenant == tenant, a.name == name)
    if version is None:
        query = query.order_by(a.version.desc()).limit(1)
    else:
        query = query.where(a.version == version)
    row = conn.execute(query).first()
    return None if row is None else _version_from_row(row)


def _version_from_row(row: Row[Any]) -> AgentVersion:
    definition = AgentDefinition(
        name=row.name, description=row.description,
        settings=Settings.model_validate(row.settings), overridable=tuple(row.overridable),
    )
    return AgentVersion(definition=definition, version=row.version, digest=row.digest,
                        source=row.source, created_at=row.created_at)
