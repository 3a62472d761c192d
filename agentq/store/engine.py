"""Engines for PostgreSQL and SQLite, and the few places where the two dialects differ.

Transactions are writes unless opened with `begin_read`: on SQLite a write starts with
`BEGIN IMMEDIATE`, so writers queue on the database lock (busy_timeout) instead of
failing when a deferred reader tries to upgrade; on PostgreSQL a read runs as one
REPEATABLE READ snapshot, so the queries of one view agree with each other.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy
from sqlalchemy import Connection, Dialect, Engine, Table, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url

_READ = "agentq_read"
SQLITE_BUSY_TIMEOUT_MS = 30_000


def create_engine(url: str) -> Engine:
    """An engine for a `sqlite:///file` or `postgresql://` URL, set up for agentq."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(parsed)
    if backend in ("postgresql", "postgres"):
        if parsed.drivername in ("postgresql", "postgres"):
            parsed = parsed.set(drivername="postgresql+psycopg")
        return _postgres_engine(parsed)
    raise ValueError(f"unsupported database backend {backend!r}")


def _sqlite_engine(url: sqlalchemy.URL) -> Engine:
    engine = sqlalchemy.create_engine(url)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # pysqlite must not emit BEGIN itself: "begin" below chooses the kind.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # inv. 8: writers take the database lock up front, one at a time.
        read = conn.get_execution_options().get(_READ)
        conn.exec_driver_sql("BEGIN" if read else "BEGIN IMMEDIATE")

    return engine


def _postgres_engine(url: sqlalchemy.URL) -> Engine:
    return sqlalchemy.create_engine(url, pool_pre_ping=True)


# psycopg puts these into its BEGIN, so a read snapshot costs no extra round trip;
# SQLAlchemy puts the connection back to the defaults when it returns to the pool.
_POSTGRES_READ = {"isolation_level": "REPEATABLE READ", "postgresql_readonly": True}


@contextmanager
def begin_read(engine: Engine) -> Iterator[Connection]:
    """A read-only transaction over one consistent snapshot."""
    with engine.connect() as conn:
        options = _POSTGRES_READ if engine.dialect.name == "postgresql" else {}
        conn.execution_options(**{_READ: True}, **options)
        with conn.begin():
            yield conn


@contextmanager
def begin_write(engine: Engine) -> Iterator[Connection]:
    """A write transaction: commits on normal exit, rolls back on an exception."""
    with engine.connect() as conn, conn.begin():
        yield conn


def insert_ignoring(dialect: Dialect, table: Table) -> Any:
    """`INSERT … ON CONFLICT DO NOTHING` whose rowcount says whether the row went in."""
    module = postgresql if dialect.name == "postgresql" else sqlite
    return module.insert(table).on_conflict_do_nothing().execution_options(preserve_rowcount=True)
