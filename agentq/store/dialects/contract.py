"""The contract of a database dialect: the few hooks where agentq's SQL differs between
PostgreSQL and SQLite (`agentq.store.dialects` chooses the implementation)."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import datetime
from functools import cache
from typing import Any, ClassVar

from sqlalchemy import URL, Connection, Engine, Table
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeEngine

POOL_SIZE = 10  # PostgreSQL connections per process
# Set on every connection of a read (`engine.begin_read`): its transaction only reads.
READ_OPTION = "agentq_read"


class Dialect(ABC):
    """The hooks where agentq's SQL differs between databases; everything else is shared."""

    name: ClassVar[str]  # SQLAlchemy's name of the dialect
    # Whether a step's commit (append, finish, follow-ups) may be one merged statement
    # of data-modifying CTEs; without, it is a transaction of several.
    one_statement_commit: ClassVar[bool]
    # Whether a statement that needs no transaction runs on the pooled driver connection,
    # past SQLAlchemy's Connection (`agentq.store.lone`): where connections are in
    # autocommit; SQLite's writers must begin with BEGIN IMMEDIATE.
    lone_statements: ClassVar[bool]
    # Whether the cap rule and the sweeper run under server-side locks (advisory locks and
    # a PL/pgSQL function); without, the database has one writer at a time.
    server_locks: ClassVar[bool]
    running_state: ClassVar[str]  # SQL: the conversation's fsm_state says it runs a turn

    def connect_url(self, url: URL) -> URL:
        """The URL to connect by (the driver chosen)."""
        return url

    @abstractmethod
    def create_engine(self, url: URL, *, pool_size: int, max_overflow: int) -> Engine:
        """An engine set up for agentq on this database."""

    @abstractmethod
    def read_options(self, *, one_snapshot: bool) -> dict[str, Any]:
        """Execution options of a read (`engine.begin_read`)."""

    @abstractmethod
    def write_options(self, *, one_statement: bool) -> dict[str, Any]:
        """Execution options of a write (`engine.begin_write`)."""

    @abstractmethod
    def insert(self, table: Table) -> Any:
        """The dialect's INSERT, which takes ON CONFLICT clauses."""

    def insert_ignoring(self, table: Table) -> Any:
        """`INSERT … ON CONFLICT DO NOTHING` whose rowcount says whether the row went in."""
        return _insert_ignoring(self, table)

    @abstractmethod
    def duration_s(self, end: ColumnElement[Any], start: ColumnElement[Any]) -> ColumnElement[float]:
        """end - start in seconds, of two Timestamp columns."""

    @abstractmethod
    def utc_day(self, hour: ColumnElement[Any]) -> ColumnElement[Any]:
        """The start of the UTC day of a Timestamp column (as stored: coerce it back)."""

    @abstractmethod
    def json_appended(self, array: ColumnElement[Any], entry: dict[str, ColumnElement[Any]]
                      ) -> ColumnElement[Any]:
        """The JSON list `array` (NULL as empty) with the object of `entry` appended, its
        values as text."""

    @abstractmethod
    def timestamp_type(self) -> TypeEngine[Any]:
        """How a Timestamp is stored."""

    @abstractmethod
    def timestamp_in(self) -> Callable[[datetime], Any]:
        """A UTC-aware datetime to what is stored."""

    @abstractmethod
    def timestamp_out(self) -> Callable[[Any], datetime]:
        """What is stored back to a UTC-aware datetime."""

    @abstractmethod
    def slots_taken(self, inline: ColumnElement[int], steps: Table, *, tenant: Any,
                    step_key: Any, now: Any, cap: Any, lock_key: Any,
                    by_kind: bool) -> ColumnElement[int]:
        """How many of the tenant's slots a claim finds taken: `inline`, the cap rule
        (`agentq.store.cap_rule`) counted in the claim's statement, or its equivalent; its
        kinds (`by_kind`) in the parameter `kinds`, `lock_key` the tenant's claim lock."""

    @abstractmethod
    def flush_not_awaited(self) -> ColumnElement[bool]:
        """A condition, true, whose evaluation lets the statement's transaction commit without
        waiting for its log to reach the disk; where the database has no such setting, true.
        For a statement that is its own transaction and whose loss in a crash costs nothing
        the statements after it do not make durable (a step's claim: design.md §5)."""

    @abstractmethod
    def lease_engine(self, engine: Engine) -> Engine:
        """The engine the lease keeper renews on: one of its own where connections are pooled."""

    @abstractmethod
    def lock_migrations(self, conn: Connection) -> None:
        """Keep two migrating processes from racing, until `conn`'s transaction ends."""


@cache
def _insert_ignoring(dialect: Dialect, table: Table) -> Any:
    return dialect.insert(table).on_conflict_do_nothing().execution_options(preserve_rowcount=True)


