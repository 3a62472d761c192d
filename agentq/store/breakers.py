"""Provider circuit breakers in the database: read, and swapped by compare-and-set on `version`.

The database is shared by every worker and API process, so a breaker kept here is one
breaker for the whole deployment, on PostgreSQL and SQLite alike. `Breakers` is mixed
into `Store`.
"""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from sqlalchemy import Connection, Engine, Row, select, update

from agentq.core.breaker import Breaker
from agentq.store.dialects import Dialect
from agentq.store.engine import begin_read, begin_write, insert_ignoring
from agentq.store.schema import provider_breakers

_FIELDS = ("state", "failures", "trips", "until", "last_error")


def breaker_from_row(row: Row) -> Breaker:
    return Breaker(row.endpoint, **{name: getattr(row, name) for name in _FIELDS},
                   version=row.version)


def swap_breaker_txn(conn: Connection, old: Breaker, new: Breaker, *, now: datetime) -> bool:
    """Write `new` if the stored breaker is still `old` (by version; 0: none stored yet)."""
    values = {name: getattr(new, name) for name in _FIELDS}
    values.update(version=old.version + 1, updated_at=now)
    if old.version == 0:
        statement = insert_ignoring(conn, provider_breakers)
        return conn.execute(statement, {"endpoint": new.endpoint, **values}).rowcount == 1
    c = provider_breakers.c
    result = conn.execute(
        update(provider_breakers)
        .where(c.endpoint == old.endpoint, c.version == old.version)
        .values(**values)
    )
    return result.rowcount == 1


class Breakers:
    """The circuit breaker verbs of `Store`."""

    def __init__(self, engine: Engine, dialect: Dialect) -> None:
        self._engine = engine
        self._dialect = dialect

    def load_breaker(self, endpoint: str) -> Breaker | None:
        with begin_read(self._engine, one_snapshot=False) as conn:
            row = conn.execute(
                select(provider_breakers).where(provider_breakers.c.endpoint == endpoint)
            ).first()
        return None if row is None else breaker_from_row(row)

    def swap_breaker(self, old: Breaker, new: Breaker, *, now: datetime) -> Breaker | None:
        """`new` as stored (its version moved on), or None if another writer came first."""
        with begin_write(self._engine, one_statement=True) as conn:
            if not swap_breaker_txn(conn, old, new, now=now):
                return None
        return replace(new, version=old.version + 1)

    def list_breakers(self) -> list[Breaker]:
        with begin_read(self._engine, one_snapshot=False) as conn:
            rows = conn.execute(select(provider_breakers).order_by(provider_breakers.c.endpoint))
            return [breaker_from_row(row) for row in rows]
