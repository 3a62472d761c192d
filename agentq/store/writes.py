"""The store's write path for a conversation (`Writes`): a transaction under its lock, an
append where the log ended when read, a step's commit, in one statement where the
dialect can (`whole_commit`) and as a transaction where it cannot, and a posted message
that starts a turn, guarded the same way (`posting`)."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from functools import partial
from typing import TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import IntegrityError

from agentq.core.events import Event, EventDraft, FsmState, InboxItem
from agentq.core.fsm import fold
from agentq.errors import LogMoved, NotFound
from agentq.store import conversations, eventlog, inbox, posting, whole_commit
from agentq.store.conversations import ConversationInfo
from agentq.store.dialects import Dialect
from agentq.store.engine import begin_read, begin_write
from agentq.store.txn import ConversationTxn
from agentq.store.whole_commit import Committed, Finish, SeeingInbox

_T = TypeVar("_T")


class Writes:
    """Writes to one conversation, each holding its lock (inv. 8)."""

    def __init__(self, engine: Engine, dialect: Dialect) -> None:
        self._engine = engine
        self._dialect = dialect

    @contextmanager
    def locked(self, conversation_id: str) -> Iterator[ConversationTxn]:
        """A transaction holding the conversation's lock: commits on exit, rolls back on error.

        Raises NotFound if the conversation does not exist.
        """
        with begin_write(self._engine) as conn:
            # inv. 8: one writer per conversation (a row lock on PostgreSQL;
            # on SQLite the write transaction began with BEGIN IMMEDIATE).
            info = conversations.load_conversation_txn(conn, conversation_id, lock=True)
            if info is None:
                raise NotFound(f"conversation {conversation_id} not found")
            yield ConversationTxn(conn, info)

    @contextmanager
    def appending(
        self, conversation_id: str, drafts: Sequence[EventDraft], *, next_seq: int,
        state_after: Callable[[list[Event]], FsmState], now: datetime,
    ) -> Iterator[tuple[ConversationTxn, list[Event]]]:
        """Append drafts where the log ended when read, then write the rest under its lock.

        For a writer that knows where the log ended (`next_seq`) and what it appends before
        it starts: the append takes the lock (inv. 8), one statement instead of `locked`'s
        `SELECT … FOR NO KEY UPDATE` and a closing UPDATE. Raises LogMoved (a Stale), writing
        nothing, if the log moved.
        """
        with begin_write(self._engine) as conn:
            done = eventlog.append_at_txn(
                conn, conversation_id, drafts, next_seq=next_seq, state_after=state_after, now=now
            )
            if done is None:
                raise LogMoved(f"the log of {conversation_id} no longer ends before seq {next_seq}")
            events, moved = done
            yield ConversationTxn(conn, moved), events

    def commit_step(
        self, conversation_id: str, drafts: Sequence[EventDraft], *, next_seq: int,
        state_after: Callable[[list[Event]], FsmState], step_key: str, worker: str,
        finish: Finish, now: datetime,
    ) -> Committed:
        """A step's commit: append its drafts where the log ended when it read it, and
        finish our step with `finish`, all or nothing. Where the dialect can, one statement
        (`whole_commit`); else, or when that wrote nothing, a transaction that raises
        LogMoved if the log moved and Stale if the step (or its call) is no longer ours.
        """
        if self._dialect.one_statement_commit:
            appended = eventlog.as_events(conversation_id, next_seq, drafts)
            with begin_write(self._engine, one_statement=True) as conn:
                moved = whole_commit.commit_whole_txn(
                    conn, appended, next_seq=next_seq, fsm=state_after(appended),
                    step_key=step_key, worker=worker, finish=finish, now=now)
            if moved is not None:
                info, waited_on = moved
                if not isinstance(finish, SeeingInbox):
                    return Committed(appended, info, waited_on=waited_on)
                return Committed(appended, info, partial(self._message_waits, conversation_id),
                                 waited_on)
        with self.appending(conversation_id, drafts, next_seq=next_seq, state_after=state_after,
                            now=now) as (tx, events):
            waiting = tx.finish(step_key, worker=worker, finish=finish, now=now)
        return Committed(events, tx.conversation, lambda: waiting)

    def posting(self, conversation_id: str, idempotency_key: str | None
                ) -> posting.Posting | None:
        """What posting a message reads, in one statement and without the lock
        (`agentq.store.posting`); None if there is no such conversation."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return posting.read_posting_txn(conn, conversation_id, idempotency_key)

    def start_turn(self, item: InboxItem, message: EventDraft, *, read: ConversationInfo,
                   now: datetime) -> tuple[Event, ConversationInfo]:
        """Write a posted message that starts a turn, taken now, and its `user_msg`, where the
        log ended in the row `read` (`posting`): one statement where the dialect can. Raises
        LogMoved, writing nothing, if the guard refused; then the caller decides again under
        the lock."""
        (event,) = eventlog.as_events(read.id, read.next_seq, [message])
        moved = self._posted(read, lambda conn: posting.start_turn_txn(
            conn, item, event, fsm=fold([event], read.fsm), now=now))
        return event, moved

    def queue(self, item: InboxItem, *, turn_id: str, read: ConversationInfo) -> None:
        """Queue a posted message in the inbox while the log ends where it did in the row
        `read` (`posting`): one statement where the dialect can. Raises LogMoved, writing
        nothing, if the guard refused; then the caller decides again under the lock."""
        self._posted(read, lambda conn: posting.queue_txn(conn, item, turn_id=turn_id,
                                                          next_seq=read.next_seq) or None)

    def _posted(self, read: ConversationInfo, write: Callable[[Connection], _T | None]) -> _T:
        """What `write` wrote under a guard on the row `read`; LogMoved if it wrote nothing.
        An inbox key or arrival number taken since the read is such a refusal: the
        statement (or the transaction, rolled back) wrote nothing."""
        try:
            with begin_write(self._engine,
                             one_statement=self._dialect.one_statement_commit) as conn:
                written = write(conn)
        except IntegrityError:
            written = None
        if written is None:
            raise LogMoved(f"the log of {read.id} no longer ends before seq {read.next_seq}, "
                           "it ended, or its inbox changed")
        return written

    def _message_waits(self, conversation_id: str) -> bool:
        with begin_read(self._engine, one_snapshot=False) as conn:
            return inbox.inbox_waiting_txn(conn, conversation_id)
