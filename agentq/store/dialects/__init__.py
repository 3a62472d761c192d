"""What differs between PostgreSQL and SQLite, held in one `Dialect` object per database.

The rest of the store asks its dialect (chosen once, from the URL, by `for_url`; or found
for a connection by `of`) and never tests a dialect's name: one contract (`contract`), two
thin implementations (`postgres`, `sqlite`), as DBOS keeps its two system databases.
"""
from __future__ import annotations

from sqlalchemy import URL, Connection, Engine
from sqlalchemy import Dialect as SqlDialect
from sqlalchemy.engine import make_url

from agentq.store.dialects.contract import POOL_SIZE, Dialect
from agentq.store.dialects.postgres import POSTGRES
from agentq.store.dialects.sqlite import SQLITE

__all__ = ["POOL_SIZE", "POSTGRES", "SQLITE", "Dialect", "for_url", "of"]

_BY_NAME: dict[str, Dialect] = {POSTGRES.name: POSTGRES, "postgres": POSTGRES, SQLITE.name: SQLITE}


def for_url(url: str | URL) -> tuple[Dialect, URL]:
    """The dialect of `url` (`sqlite:///file`, `postgresql://…`), and the URL it connects by."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    dialect = _BY_NAME.get(backend)
    if dialect is None:
        raise ValueError(f"unsupported database backend {backend!r}")
    return dialect, dialect.connect_url(parsed)


def of(bind: Connection | Engine | SqlDialect) -> Dialect:
    """The dialect a connection or engine (made by `create_engine`) runs on."""
    return _BY_NAME[(bind if isinstance(bind, SqlDialect) else bind.dialect).name]
