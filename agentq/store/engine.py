"""Engines for PostgreSQL and SQLite, and the few places where the two dialects differ.

Transactions are writes unless opened with `begin_read`: on SQLite a write starts with
`BEGIN IMMEDIATE`, so writers queue on the database lock (busy_timeout) instead of
failing when a deferred reader tries to upgrade; on PostgreSQL a read runs as one
REPEATABLE READ snapshot, so the queries of one view agree with each other. A database
that cannot be reached (PostgreSQL restarting, SQLite locked past its busy timeout)
raises `Unavailable`, so callers answer "retry shortly" instead of failing.
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cache
from typing import Any

import sqlalchemy
from sqlalchemy import (
    BindParameter,
    Column,
    Connection,
    Dialect,
    Engine,
    Table,
    bindparam,
    event,
    select,
    union_all,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url

from agentq.errors import Unavailable

_READ = "agentq_read"
SQLITE_BUSY_TIMEOUT_MS = 30_000
POOL_SIZE = 10  # PostgreSQL connections per process
POOL_TIMEOUT_S = 60.0
PING_AFTER_IDLE_S = 1.0  # a pooled PostgreSQL connection idle this long is checked before use


def create_engine(url: str, *, pool_size: int = POOL_SIZE, max_overflow: int = 0) -> Engine:
    """An engine for a `sqlite:///file` or `postgresql://` URL, set up for agentq.

    The pool sizes matter on PostgreSQL only: a fixed pool by default, so a worker's many
    green threads wait their turn for a connection (each holds one for one short
    transaction) instead of opening and closing overflow connections, which costs both
    sides a connection setup per step under load; an API process that serves thousands of
    greenlets asks for more.
    """
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(parsed)
    if backend in ("postgresql", "postgres"):
        if parsed.drivername in ("postgresql", "postgres"):
            parsed = parsed.set(drivername="postgresql+psycopg")
        return _postgres_engine(parsed, pool_size=pool_size, max_overflow=max_overflow)
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


def _postgres_engine(url: sqlalchemy.URL, *, pool_size: int, max_overflow: int) -> Engine:
    engine = sqlalchemy.create_engine(url, pool_size=pool_size, max_overflow=max_overflow,
                                      pool_timeout=POOL_TIMEOUT_S)
    dialect = engine.dialect

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        # Like pool_pre_ping, but only for a connection that sat idle: a worker running
        # steps back to back would otherwise pay a round trip for every transaction. A
        # connection lost while in use fails that one step, and the pool starts afresh.
        idle_since = record.info.get("idle_since")
        if idle_since is None or time.monotonic() - idle_since < PING_AFTER_IDLE_S:
            return
        try:
            dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as exc:
            raise sqlalchemy.exc.DisconnectionError(str(exc)) from exc

    return engine


# psycopg puts these into its BEGIN, so a read snapshot costs no extra round trip;
# SQLAlchemy puts the connection back to the defaults when it returns to the pool.
_POSTGRES_READ = {"isolation_level": "REPEATABLE READ", "postgresql_readonly": True}
# psycopg sends BEGIN and COMMIT as round trips of their own: three for a lone statement.
_POSTGRES_AUTOCOMMIT = {"isolation_level": "AUTOCOMMIT"}


# Driver errors that mean "the database cannot serve this now", not "this request is wrong".
_UNREACHABLE = (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError)


@contextmanager
def _reachable() -> Iterator[None]:
    try:
        yield
    except sqlalchemy.exc.TimeoutError as exc:  # every pooled connection busy for pool_timeout
        raise Unavailable("the database is busy: no connection came free in time; retry shortly",
                          code="database_busy") from exc
    except _UNREACHABLE as exc:
        raise Unavailable(f"the database cannot be reached now ({type(exc.orig).__name__}); "
                          "retry shortly", code="database_unavailable") from exc


@contextmanager
def begin_read(engine: Engine, *, one_snapshot: bool = True) -> Iterator[Connection]:
    """A read-only transaction over one consistent snapshot.

    Without `one_snapshot`, each statement sees what was committed when it ran, and on
    PostgreSQL the read needs no BEGIN and COMMIT: for a caller that reads one statement,
    or bounds its later reads by what the first one saw.
    """
    with _reachable(), engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn.execution_options(**(_POSTGRES_READ if one_snapshot else _POSTGRES_AUTOCOMMIT))
        conn.execution_options(**{_READ: True})
        with conn.begin():
            yield conn


@contextmanager
def begin_write(engine: Engine, *, one_statement: bool = False) -> Iterator[Connection]:
    """A write transaction: commits on normal exit, rolls back on an exception.

    A caller that writes with `one_statement` is atomic without a transaction around it:
    on PostgreSQL it runs in autocommit, one round trip instead of three.
    """
    with _reachable(), engine.connect() as conn:
        if one_statement and engine.dialect.name == "postgresql":
            conn.execution_options(**_POSTGRES_AUTOCOMMIT)
        with conn.begin():
            yield conn


def param(column: Column[Any], name: str | None = None) -> BindParameter[Any]:
    """A named parameter of the column's type, for statements built once and run often."""
    return bindparam(name or column.name, type_=column.type)


def parameter_rows(
    table: Table, names: Sequence[str], prefix: str, count: int, *, where: Any = None
) -> Any:
    """`count` rows of parameters `<prefix><i>_<name>` (typed as the table's columns), as one
    SELECT to insert from; with `where`, only the rows for which it holds.

    A UNION ALL of SELECTs, not a multi-row VALUES: SQLAlchemy keeps the compiled form of
    the one and compiles the other anew on every execution.
    """
    rows = []
    for i in range(count):
        row = select(*(param(table.c[name], f"{prefix}{i}_{name}").label(name) for name in names))
        rows.append(row if where is None else row.where(where))
    return rows[0] if count == 1 else union_all(*rows)


def row_parameters(prefix: str, rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The parameters `parameter_rows` names, for these rows in order."""
    return {f"{prefix}{i}_{name}": value
            for i, row in enumerate(rows) for name, value in row.items()}


def insert_ignoring(dialect: Dialect, table: Table) -> Any:
    """`INSERT … ON CONFLICT DO NOTHING` whose rowcount says whether the row went in."""
    return _insert_ignoring(dialect.name, table)


@cache
def _insert_ignoring(dialect_name: str, table: Table) -> Any:
    module = postgresql if dialect_name == "postgresql" else sqlite
    return module.insert(table).on_conflict_do_nothing().execution_options(preserve_rowcount=True)


def psycopg_waits_in_c() -> bool:
    """True if psycopg waits for the server in C, where gevent's loop cannot switch away.

    psycopg 3 picks its wait function when first imported: the C one unless gevent has
    patched `select` by then (or `PSYCOPG_WAIT_FUNC` names one); see agentq/process/cooperative.py.
    """
    try:
        from psycopg import waiting
    except ImportError:  # no PostgreSQL driver: nothing to wait on
        return False
    wait_c = getattr(waiting, "wait_c", None)
    return wait_c is not None and waiting.wait is wait_c
