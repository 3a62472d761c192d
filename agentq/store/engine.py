"""Engines for PostgreSQL and SQLite, and the transactions every store read and write runs in.

Transactions are writes unless opened with `begin_read`: on SQLite a write starts with
`BEGIN IMMEDIATE`, so writers queue on the database lock (busy_timeout) instead of
failing when a deferred reader tries to upgrade; on PostgreSQL a read runs as one
REPEATABLE READ snapshot, so the queries of one view agree with each other. A database
that cannot be reached (PostgreSQL restarting, SQLite locked past its busy timeout)
raises `Unavailable`, so callers answer "retry shortly" instead of failing.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, cast

import sqlalchemy
from sqlalchemy import (
    BindParameter,
    Column,
    ColumnElement,
    Connection,
    Engine,
    Table,
    bindparam,
    literal,
    select,
    union_all,
)

from agentq.errors import Unavailable
from agentq.store import dialects, idle_connections
from agentq.store.compiled_cache import CompiledByStatement
from agentq.store.lone import LoneConnection

POOL_SIZE = dialects.POOL_SIZE


def create_engine(url: str, *, pool_size: int = POOL_SIZE, max_overflow: int = 0) -> Engine:
    """An engine for a `sqlite:///file` or `postgresql://` URL, set up for agentq by its
    dialect (`agentq.store.dialects`).

    The pool sizes matter on PostgreSQL only: an API process that serves thousands of
    greenlets asks for more than a worker. Compiled statements are found by their key's
    identity first (agentq.store.compiled_cache).
    """
    dialect, parsed = dialects.for_url(url)
    engine = dialect.create_engine(parsed, pool_size=pool_size, max_overflow=max_overflow)
    engine.update_execution_options(compiled_cache=CompiledByStatement())
    return engine


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
    or bounds its later reads by what the first one saw. Its statements then run on the
    pooled connection, past SQLAlchemy's Connection (agentq.store.lone).
    """
    dialect = dialects.of(engine)
    if not one_snapshot and dialect.lone_statements:
        yield from _lone(engine)
        return
    with _reachable(), _connect(engine, dialect) as conn:
        options = dialect.read_options(one_snapshot=one_snapshot)
        if options:
            conn.execution_options(**options)
        with conn.begin():
            yield conn


@contextmanager
def begin_write(engine: Engine, *, one_statement: bool = False) -> Iterator[Connection]:
    """A write transaction: commits on normal exit, rolls back on an exception.

    A caller that writes with `one_statement` is atomic without a transaction around it:
    on PostgreSQL it runs in autocommit, one round trip instead of three, on the pooled
    connection past SQLAlchemy's Connection (agentq.store.lone).
    """
    dialect = dialects.of(engine)
    if one_statement and dialect.lone_statements:
        yield from _lone(engine)
        return
    with _reachable(), _connect(engine, dialect) as conn:
        options = dialect.write_options(one_statement=one_statement)
        if options:
            conn.execution_options(**options)
        with conn.begin():
            yield conn


def _connect(engine: Engine, dialect: dialects.Dialect) -> Connection:
    """`engine.connect()`, on a connection lone statements left idle if one waits
    (agentq.store.idle_connections): none waits on the pool while one idles there."""
    if not dialect.lone_statements:
        return engine.connect()
    return engine._connection_cls(engine, connection=idle_connections.checkout(engine))


def _lone(engine: Engine) -> Iterator[Connection]:
    """A pooled connection in autocommit that runs statements past SQLAlchemy's Connection
    (agentq.store.lone), and acts as one for anything else: the body of `begin_read` and
    `begin_write` for lone statements, a generator they delegate to."""
    with _reachable():
        lone = LoneConnection(engine)
        try:
            yield cast(Connection, lone)
        finally:
            lone.close()


def one_of(column: ColumnElement[Any], values: Iterable[Any]) -> ColumnElement[bool]:
    """`column IN (...)` for a fixed set of values, each its own parameter.

    `column.in_(a_list)` is an expanding parameter, which SQLAlchemy renders anew into the
    statement's SQL at every execution (a few percent of a worker's CPU on a hot statement);
    a list of plain parameters keeps the one compiled form. For values fixed when the
    statement is built: the statement is then kept per set of values.
    """
    return column.in_([literal(value, type_=column.type) for value in values])


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


def insert_ignoring(bind: Connection, table: Table) -> Any:
    """`INSERT … ON CONFLICT DO NOTHING` whose rowcount says whether the row went in."""
    return dialects.of(bind).insert_ignoring(table)


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
