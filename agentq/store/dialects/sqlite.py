"""SQLite: one file in WAL mode, writers serialized by `BEGIN IMMEDIATE` and a busy timeout,
timestamps as fixed-width text, and no server-side locks (one writer at a time)."""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import sqlalchemy
from sqlalchemy import (
    URL,
    Connection,
    Engine,
    String,
    Table,
    event,
    func,
    literal,
    true,
    type_coerce,
)
from sqlalchemy.dialects import sqlite
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeEngine

from agentq.core.timefmt import format_ts, parse_ts
from agentq.store.dialects.contract import READ_OPTION, Dialect

BUSY_TIMEOUT_MS = 30_000
RUNNING_STATE = "json_extract(fsm_state, '$.state') = 'running'"


class Sqlite(Dialect):
    name = "sqlite"
    one_statement_commit = False
    lone_statements = False
    server_locks = False
    running_state = RUNNING_STATE

    def create_engine(self, url: URL, *, pool_size: int, max_overflow: int) -> Engine:
        """The pool sizes do not matter: SQLite runs one writer at a time anyway."""
        engine = sqlalchemy.create_engine(url)

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            # pysqlite must not emit BEGIN itself: "begin" below chooses the kind.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            # inv. 8: writers take the database lock up front, one at a time.
            read = conn.get_execution_options().get(READ_OPTION)
            conn.exec_driver_sql("BEGIN" if read else "BEGIN IMMEDIATE")

        return engine

    def read_options(self, *, one_snapshot: bool) -> dict[str, Any]:
        return {READ_OPTION: True}

    def write_options(self, *, one_statement: bool) -> dict[str, Any]:
        return {}

    def insert(self, table: Table) -> Any:
        return sqlite.insert(table)

    def duration_s(self, end: ColumnElement[Any], start: ColumnElement[Any]) -> ColumnElement[float]:
        # Date math works in julian days: the difference rounded to the millisecond it knows.
        return func.round((func.julianday(end) - func.julianday(start)) * 86400.0, 3)

    def utc_day(self, hour: ColumnElement[Any]) -> ColumnElement[Any]:
        # `format_ts` text (2026-11-21T22:00:00.000000Z): the day is its first 10 characters.
        return func.substr(type_coerce(hour, String), 1, 10).op("||")(literal("T00:00:00.000000Z"))

    def json_appended(self, array: ColumnElement[Any], entry: dict[str, ColumnElement[Any]]
                      ) -> ColumnElement[Any]:
        pairs = [part for key, value in entry.items() for part in (literal(key), value)]
        return func.json_insert(func.coalesce(array, literal("[]")), literal("$[#]"),
                                func.json_object(*pairs))

    def timestamp_type(self) -> TypeEngine[Any]:
        return String(27)

    def timestamp_in(self) -> Callable[[datetime], Any]:
        return format_ts

    def timestamp_out(self) -> Callable[[Any], datetime]:
        return parse_ts

    def slots_taken(self, inline: ColumnElement[int], steps: Table, *, tenant: Any,
                    step_key: Any, now: Any, cap: Any, lock_key: Any,
                    by_kind: bool) -> ColumnElement[int]:
        """The rule counted inside the claim: SQLite runs one writer at a time, no lock needed."""
        return inline

    def flush_not_awaited(self) -> ColumnElement[bool]:
        """SQLite's syncing is per connection (PRAGMA synchronous): kept as it is."""
        return true()

    def lease_engine(self, engine: Engine) -> Engine:
        return engine

    def lock_migrations(self, conn: Connection) -> None:
        """Nothing to do: the migration's write transaction began with BEGIN IMMEDIATE."""


SQLITE = Sqlite()
