"""The store's reads of a conversation's log (`EventLog`), and a fork of it: what the API
pages through and a step decides from."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from sqlalchemy import Connection, Engine

from agentq.core.events import Event, Summary, View
from agentq.store import fork, views
from agentq.store.conversations import ConversationInfo
from agentq.store.dialects import Dialect
from agentq.store.engine import begin_read, begin_write
from agentq.store.event_cache import EventCache


class ConversationReader:
    """Reads of one conversation's log as of its row; only valid inside `EventLog.reader`."""

    def __init__(self, conn: Connection, conversation_id: str, cache: EventCache) -> None:
        self._conn = conn
        self._id = conversation_id
        self._cache = cache

    def view(self, *, turn_only: bool = False) -> View | None:
        """As `EventLog.load_view`, reading only the events the process's cache lacks."""
        return views.load_view_txn(self._conn, self._id, turn_only=turn_only, cache=self._cache)

    def with_history(self, turn: View) -> View:
        """A turn-only view grown to everything after the latest summary: a model call's context."""
        return views.with_history_txn(self._conn, turn, self._cache)


class EventLog:
    """Events, summaries and views of conversations; forks of a log."""

    def __init__(self, engine: Engine, dialect: Dialect, cache: EventCache) -> None:
        self._engine = engine
        self._dialect = dialect
        self._cache = cache

    def list_events(
        self, conversation_id: str, *, after_seq: int = 0, limit: int | None = None,
        before_seq: int | None = None,
    ) -> list[Event]:
        """Events with `after_seq` < seq (< `before_seq`), in seq order."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return views.list_events_txn(
                conn, conversation_id, after_seq=after_seq, limit=limit, before_seq=before_seq
            )

    def load_view(self, conversation_id: str, *, turn_only: bool = False) -> View | None:
        """Latest summary, the events after it (or only the current turn's), open calls, inbox."""
        with begin_read(self._engine) as conn:
            return views.load_view_txn(conn, conversation_id, turn_only=turn_only)

    @contextmanager
    def reader(self, conversation_id: str) -> Iterator[ConversationReader]:
        """Reads of one conversation's log as of its row: what a step decides from.

        Not one database snapshot (that costs PostgreSQL a BEGIN and a COMMIT): every event
        read is bounded by the row's next_seq, and events never change. Open calls and the
        inbox may be read newer than the row; whatever a step does about them is checked
        again under the conversation's lock when it commits.
        """
        with begin_read(self._engine, one_snapshot=False) as conn:
            yield ConversationReader(conn, conversation_id, self._cache)

    def list_summaries(self, conversation_id: str) -> list[Summary]:
        """Every summary of the conversation, by to_seq."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return views.list_summaries_txn(conn, conversation_id)

    def fork(self, source_id: str, *, at_seq: int, now: datetime) -> ConversationInfo:
        """A new conversation holding a copy of the source's log through `at_seq`."""
        with begin_write(self._engine) as conn:
            return fork.fork_conversation_txn(conn, source_id, at_seq=at_seq, now=now)
