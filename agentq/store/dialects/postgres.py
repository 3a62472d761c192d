"""PostgreSQL: a pool of psycopg connections (waiting on gevent's hub in a gevent process),
reads as REPEATABLE READ snapshots, lone statements in autocommit, JSONB and TIMESTAMPTZ, and
the server-side locks of the cap rule."""
from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import sqlalchemy
from psycopg import _queries as psycopg_queries
from psycopg.pq import TransactionStatus
from sqlalchemy import (
    URL,
    Connection,
    Engine,
    Float,
    Integer,
    Table,
    Text,
    bindparam,
    cast,
    event,
    func,
    literal,
    null,
    true,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeEngine

from agentq.core.timefmt import to_utc
from agentq.store.dialects import green_wait
from agentq.store.dialects.contract import READ_OPTION, Dialect
from agentq.store.dialects.described import DescribedLazily
from agentq.store.dialects.json_loads import decode_json_as_utf8

POOL_TIMEOUT_S = 60.0
PING_AFTER_IDLE_S = 1.0  # a pooled connection idle this long is checked before use
# Any constant works: it only keeps two migrating processes from racing.
MIGRATION_LOCK_ID = 0x61676E7471
RUNNING_STATE = "(fsm_state ->> 'state') = 'running'"

# psycopg prepares a statement on a connection once it has run there this many times
# (its default is 5). A worker's statements are a few dozen fixed shapes spread over its pool,
# so at 5 a fresh worker sends each shape unprepared 5 times per connection: with 10
# connections, about a sixth of a short run's statements, each parsed and planned anew by
# PostgreSQL. At 1, a shape run once (an operator's ad hoc read) is never prepared, and a
# shape run twice is prepared from then on. psycopg keeps at most 100 per connection.
PREPARE_AFTER_RUNS = 1

# psycopg converts a statement's placeholders anew on every run past these sizes, unless
# agentq raises them (`cache_every_statement_conversion`).
CACHED_STATEMENT_BYTES = 64 * 1024
CACHED_STATEMENT_PARAMS = 1000

# A connection is in autocommit from when it opens: nearly every statement agentq runs is a
# transaction of its own (a step's claim, its commit, a view's read; psycopg would send BEGIN
# and COMMIT as round trips of their own, three for a lone statement). Only work that needs a
# transaction sets one up, which psycopg puts into its BEGIN (a read snapshot costs no extra
# round trip), and SQLAlchemy puts the connection back into autocommit when it returns to the
# pool. Setting autocommit at every checkout instead, and undoing it at every checkin, cost
# 5.7% of the instructions of a turn run in-process (docs/benchmarks.md).
_DEFAULT_ISOLATION = "AUTOCOMMIT"
_SNAPSHOT = {"isolation_level": "REPEATABLE READ", "postgresql_readonly": True, READ_OPTION: True}
_TRANSACTION = {"isolation_level": "READ COMMITTED"}
_AS_OPENED: dict[str, Any] = {}


class Postgres(Dialect):
    name = "postgresql"
    one_statement_commit = True
    lone_statements = True
    server_locks = True
    running_state = RUNNING_STATE

    def connect_url(self, url: URL) -> URL:
        return url.set(drivername="postgresql+psycopg") if "+" not in url.drivername else url

    def create_engine(self, url: URL, *, pool_size: int, max_overflow: int) -> Engine:
        """A fixed pool by default: a worker's green threads wait their turn for a connection
        (each holds one for one short transaction) instead of opening and closing overflow
        connections, which costs both sides a connection setup per step under load."""
        cache_every_statement_conversion()
        engine = sqlalchemy.create_engine(url, pool_size=pool_size, max_overflow=max_overflow,
                                          pool_timeout=POOL_TIMEOUT_S,
                                          isolation_level=_DEFAULT_ISOLATION,
                                          pool_reset_on_return=None,  # `_on_reset` below
                                          connect_args={"prepare_threshold": PREPARE_AFTER_RUNS,
                                                        "cursor_factory": DescribedLazily})
        dialect = engine.dialect

        @event.listens_for(engine, "do_connect")
        def _connect(_dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
            if not green_wait.patched():
                return None  # SQLAlchemy's own connect
            return green_wait.GreenWaiting.connect(*cargs, **cparams)

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            decode_json_as_utf8(dbapi_connection)

        @event.listens_for(engine, "reset")
        def _on_reset(dbapi_connection: Any, record: Any, _state: Any) -> None:
            # A connection comes back in autocommit nearly always, with nothing to roll back:
            # SQLAlchemy's own reset called psycopg's rollback() for it anyway (1% of a
            # turn's instructions). One returned inside a transaction is rolled back. Every
            # checkin passes here, so here it is marked idle, for `_on_checkout` (one
            # listener less at each checkin).
            if dbapi_connection.pgconn.transaction_status != TransactionStatus.IDLE:
                dbapi_connection.rollback()
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

    def read_options(self, *, one_snapshot: bool) -> dict[str, Any]:
        return _SNAPSHOT if one_snapshot else _AS_OPENED

    def write_options(self, *, one_statement: bool) -> dict[str, Any]:
        return _AS_OPENED if one_statement else _TRANSACTION

    def insert(self, table: Table) -> Any:
        return postgresql.insert(table)

    def duration_s(self, end: ColumnElement[Any], start: ColumnElement[Any]) -> ColumnElement[float]:
        return cast(func.extract("epoch", end) - func.extract("epoch", start), Float)

    def utc_day(self, hour: ColumnElement[Any]) -> ColumnElement[Any]:
        return func.date_trunc("day", hour, literal("UTC"))

    def json_appended(self, array: ColumnElement[Any], entry: dict[str, ColumnElement[Any]]
                      ) -> ColumnElement[Any]:
        pairs = [part for key, value in entry.items() for part in (literal(key), cast(value, Text))]
        empty = cast(literal("[]"), postgresql.JSONB)
        return func.coalesce(array, empty).op("||")(
            func.jsonb_build_array(func.jsonb_build_object(*pairs)))

    def timestamp_type(self) -> TypeEngine[Any]:
        return postgresql.TIMESTAMP(timezone=True)

    def timestamp_in(self) -> Callable[[datetime], Any]:
        return to_utc

    def timestamp_out(self) -> Callable[[Any], datetime]:
        return to_utc

    def slots_taken(self, inline: ColumnElement[int], steps: Table, *, tenant: Any,
                    step_key: Any, now: Any, cap: Any, lock_key: Any,
                    by_kind: bool) -> ColumnElement[int]:
        """`agentq_slots_taken`, the rule compiled to PL/pgSQL: it counts under the tenant's
        advisory lock, in a snapshot taken after it (`cap_rule.plpgsql_body` says why)."""
        kinds = bindparam("kinds", type_=postgresql.ARRAY(steps.c.kind.type)) if by_kind else null()
        return func.agentq_slots_taken(tenant, step_key, now, cap, lock_key, kinds, type_=Integer)

    def flush_not_awaited(self) -> ColumnElement[bool]:
        """`synchronous_commit` off for the rest of the transaction (`set_config`'s is_local):
        its commit returns once its WAL is written, and the WAL writer flushes it within
        a moment. Volatile, so it is evaluated wherever it stands in the statement."""
        return func.set_config("synchronous_commit", "off", true()) == "off"

    def lease_engine(self, engine: Engine) -> Engine:
        url = engine.url.render_as_string(hide_password=False)
        return self.create_engine(sqlalchemy.make_url(url), pool_size=1, max_overflow=0)

    def lock_migrations(self, conn: Connection) -> None:
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_ID})")


def cache_every_statement_conversion() -> None:
    """Let psycopg keep the conversion of every statement agentq sends, however long.

    psycopg turns a statement's `%(name)s` placeholders into `$n` anew on every execution
    when the statement is longer than 4 KB or has more than 50 parameters (its guard
    against ORMs' one-off statements); a step's commit is both, and converting it cost a
    worker about 0.1 to 0.3 ms of CPU per step. agentq builds each statement once per
    shape (a bounded set), so its conversions are kept like the short ones', in psycopg's
    own cache (an LRU of 128). Without those names (another psycopg), nothing changes.
    """
    if hasattr(psycopg_queries, "MAX_CACHED_STATEMENT_LENGTH"):
        psycopg_queries.MAX_CACHED_STATEMENT_LENGTH = CACHED_STATEMENT_BYTES
    if hasattr(psycopg_queries, "MAX_CACHED_STATEMENT_PARAMS"):
        psycopg_queries.MAX_CACHED_STATEMENT_PARAMS = CACHED_STATEMENT_PARAMS


POSTGRES = Postgres()
