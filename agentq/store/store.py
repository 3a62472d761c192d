"""The Store: one public method per transaction, each composed from `…_txn(conn, …)` helpers.

Time is passed in (`now`), never read here, so every transition is testable with plain
datetimes and the caller decides which clock counts.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime

from sqlalchemy import Connection, Engine

from agentq.core.agents import AgentRef
from agentq.core.events import Event, EventDraft, FsmState, InboxItem, Summary, ToolCallRecord, View
from agentq.core.occurrences import Occurrence
from agentq.core.settings import Settings
from agentq.errors import LogMoved, NotFound
from agentq.store import (
    audit,
    backlog,
    calls,
    conversations,
    dialects,
    eventlog,
    fork,
    inbox,
    ledger,
    whole_commit,
)
from agentq.store.agents import AgentVersions
from agentq.store.api_keys import ApiKeys
from agentq.store.audit import ModelCallRecord
from agentq.store.breakers import Breakers
from agentq.store.conversations import ConversationInfo
from agentq.store.engine import POOL_SIZE, begin_read, begin_write, create_engine
from agentq.store.event_cache import DEFAULT_MAX_BYTES as DEFAULT_CACHE_BYTES
from agentq.store.event_cache import EventCache
from agentq.store.ledger import NewStep, StepRecord
from agentq.store.metrics import Metrics
from agentq.store.migrations import migrate
from agentq.store.outbox import record_outbox_txn
from agentq.store.overview import Overviews
from agentq.store.slots import Slots
from agentq.store.sweeper_lock import Sweeps
from agentq.store.tenant_keys import TenantKeys
from agentq.store.txn import ConversationTxn
from agentq.store.usage import Usage
from agentq.store.webhooks import Webhooks
from agentq.store.whole_commit import Committed, Finish, SeeingInbox


class ConversationReader:
    """Reads of one conversation's log as of its row; only valid inside `Store.reader`."""

    def __init__(self, conn: Connection, conversation_id: str, cache: EventCache) -> None:
        self._conn = conn
        self._id = conversation_id
        self._cache = cache

    def view(self, *, turn_only: bool = False) -> View | None:
        """As `Store.load_view`, reading only the events the process's cache lacks."""
        return eventlog.load_view_txn(self._conn, self._id, turn_only=turn_only, cache=self._cache)

    def with_history(self, turn: View) -> View:
        """A turn-only view grown to everything after the latest summary: a model call's context."""
        return eventlog.with_history_txn(self._conn, turn, self._cache)


class Store(AgentVersions, ApiKeys, TenantKeys, Breakers, Overviews, Metrics, Sweeps, Webhooks, Usage,
            Slots):
    """Durable state of every conversation, on PostgreSQL or SQLite."""

    def __init__(self, engine: Engine, *, event_cache: int = 0,
                 event_cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.engine = engine
        self._lease_engine: Engine | None = None
        # decoded events of the `event_cache` conversations stepped last (0: none kept)
        self.event_cache = EventCache(event_cache, event_cache_bytes)

    @classmethod
    def open(cls, url: str, *, event_cache: int = 0,
             event_cache_bytes: int = DEFAULT_CACHE_BYTES, **pool: int) -> Store:
        """A store on `url` (`sqlite:///file` or `postgresql://…`); call `migrate` once first.

        `event_cache`: how many conversations' events `reader` keeps decoded (a worker's),
        `event_cache_bytes` about how many bytes of them at most;
        `pool`: `pool_size` and `max_overflow` of `create_engine`.
        """
        return cls(create_engine(url, **pool), event_cache=event_cache,
                   event_cache_bytes=event_cache_bytes)

    def migrate(self) -> None:
        """Bring the schema to the newest Alembic revision; harmless when it is there."""
        migrate(self.engine)

    def pool_size(self) -> int:
        """How many pooled connections this process's steps share (`create_engine`)."""
        size = getattr(self.engine.pool, "size", None)
        return max(1, size()) if callable(size) else POOL_SIZE

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()
        if self._lease_engine not in (None, self.engine):
            self._lease_engine.dispose()

    # conversations

    def create_conversation(
        self,
        *,
        tenant: str,
        settings: Settings,
        now: datetime,
        conversation_id: str | None = None,
        agent: AgentRef | None = None,
    ) -> ConversationInfo:
        """A new, active, idle conversation with an empty log (started from `agent`, if given)."""
        info = ConversationInfo(
            id=conversation_id or str(uuid.uuid4()),
            tenant=tenant,
            settings=settings,
            fsm=FsmState(),
            status="active",
            next_seq=1,
            created_at=now,
            updated_at=now,
            agent=agent,
        )
        with begin_write(self.engine) as conn:
            conversations.insert_conversation_txn(conn, info)
        return info

    def fork_conversation(self, source_id: str, *, at_seq: int, now: datetime) -> ConversationInfo:
        """A new conversation holding a copy of the source's log through `at_seq`."""
        with begin_write(self.engine) as conn:
            return fork.fork_conversation_txn(conn, source_id, at_seq=at_seq, now=now)

    def load_conversation(
        self, conversation_id: str, *, tenant: str | None = None
    ) -> ConversationInfo | None:
        """The conversation, or None if absent or owned by another `tenant`."""
        with begin_read(self.engine, one_snapshot=False) as conn:
            info = conversations.load_conversation_txn(conn, conversation_id)
        if info is None or (tenant is not None and info.tenant != tenant):
            return None
        return info

    def list_conversations(
        self,
        *,
        tenant: str | None = None,
        status: str | None = None,
        state: str | None = None,
        after_id: str | None = None,
        limit: int = 50,
    ) -> list[ConversationInfo]:
        """Conversations ordered by (created_at, id), the page after the one with `after_id`."""
        with begin_read(self.engine, one_snapshot=False) as conn:
            return conversations.list_conversations_txn(
                conn, tenant=tenant, status=status, state=state, after_id=after_id, limit=limit
            )

    def list_stalled_conversations(
        self, *, updated_before: datetime, now: datetime | None = None, limit: int = 500
    ) -> list[str]:
        """Conversations with work to do that have not moved since `updated_before`, and
        run no step under a lease live at `now` (by default, `updated_before`)."""
        with begin_read(self.engine, one_snapshot=False) as conn:
            return conversations.list_stalled_conversations_txn(
                conn, updated_before=updated_before, now=now or updated_before, limit=limit
            )

    def list_conversation_ids(self, *, status: str | None = "active") -> list[str]:
        """Ids of conversations with `status` (every one when None), oldest first."""
        with begin_read(self.engine, one_snapshot=False) as conn:
            return conversations.list_conversation_ids_txn(conn, status=status)

    # the log

    def list_events(
        self,
        conversation_id: str,
        *,
        after_seq: int = 0,
        limit: int | None = None,
        before_seq: int | None = None,
    ) -> list[Event]:
        """Events with `after_seq` < seq (< `before_seq`), in seq order."""
        with begin_read(self.engine, one_snapshot=False) as conn:
            return eventlog.list_events_txn(
                conn, conversation_id, after_seq=after_seq, limit=limit, before_seq=before_seq
            )

    def load_view(self, conversation_id: str, *, turn_only: bool = False) -> View | None:
        """Latest summary, the events after it (or only the current turn's), open calls, inbox."""
        with begin_read(self.engine) as conn:
            return eventlog.load_view_txn(conn, conversation_id, turn_only=turn_only)

    @contextmanager
    def reader(self, conversation_id: str) -> Iterator[ConversationReader]:
        """Reads of one conversation's log as of its row: what a step decides from.

        Not one database snapshot (that costs PostgreSQL a BEGIN and a COMMIT): every event
        read is bounded by the row's next_seq, and events never change. Open calls and the
        inbox may be read newer than the row; whatever a step does about them is checked
        again under the conversation's lock when it commits.
        """
        with begin_read(self.engine, one_snapshot=False) as conn:
            yield ConversationReader(conn, conversation_id, self.event_cache)

    def list_summaries(self, conversation_id: str) -> list[Summary]:
        """Every summary of the conversation, by to_seq."""
        with begin_read(self.engine, one_snapshot=False) as conn:
            return eventlog.list_summaries_txn(conn, conversation_id)

    # tool calls and inbox

    def list_tool_calls(
        self, conversation_id: str, *, status: str | None = None
    ) -> list[ToolCallRecord]:
        """Calls ordered by (created_at, id), only those with `status` when given."""
        with begin_read(self.engine, one_snapshot=False) as conn:
            statuses = None if status is None else (status,)
            return calls.list_calls_txn(conn, conversation_id, statuses=statuses)

    def list_descendants(self, conversation_id: str) -> list[ConversationInfo]:
        """The sub-agents' conversations under this one, children before their own, each
        generation in creation order."""
        found: list[ConversationInfo] = []
        generation = [conversation_id]
        with begin_read(self.engine, one_snapshot=False) as conn:
            while generation:
                children = conversations.list_children_txn(conn, generation)
                found.extend(children)
                generation = [child.id for child in children]
        return found

    def load_tool_call(self, conversation_id: str, call_id: str) -> ToolCallRecord | None:
        with begin_read(self.engine, one_snapshot=False) as conn:
            return calls.load_call_txn(conn, conversation_id, call_id)

    def load_call_and_conversation(
        self, conversation_id: str, call_id: str
    ) -> tuple[ConversationInfo, ToolCallRecord] | None:
        """A call with its conversation, read together: all a tool step reads."""
        with begin_read(self.engine, one_snapshot=False) as conn:
            return calls.load_call_and_conversation_txn(conn, conversation_id, call_id)

    def list_overdue_calls(self, *, now: datetime, limit: int = 100) -> list[ToolCallRecord]:
        """Pending calls whose `expires_at` has come, soonest first, across conversations."""
        with begin_read(self.engine, one_snapshot=False) as conn:
            return calls.list_overdue_calls_txn(conn, now=now, limit=limit)

    def list_inbox(self, conversation_id: str, *, taken: bool | None = False) -> list[InboxItem]:
        """Inbox items by (created_at, id): untaken by default, taken, or all (None)."""
        with begin_read(self.engine, one_snapshot=False) as conn:
            return inbox.list_inbox_txn(conn, conversation_id, taken=taken)

    def find_turn(self, conversation_id: str, turn_id: str) -> inbox.TurnStart | None:
        """Where the turn starts (its user_msg's seq, or None while it waits); None: no such turn."""
        with begin_read(self.engine, one_snapshot=False) as conn:
            return inbox.find_turn_txn(conn, conversation_id, turn_id)

    # the write transaction

    @contextmanager
    def locked(self, conversation_id: str) -> Iterator[ConversationTxn]:
        """A transaction holding the conversation's lock: commits on exit, rolls back on error.

        Raises NotFound if the conversation does not exist.
        """
        with begin_write(self.engine) as conn:
            # inv. 8: one writer per conversation (a row lock on PostgreSQL;
            # on SQLite the write transaction began with BEGIN IMMEDIATE).
            info = conversations.load_conversation_txn(conn, conversation_id, lock=True)
            if info is None:
                raise NotFound(f"conversation {conversation_id} not found")
            yield ConversationTxn(conn, info)

    @contextmanager
    def appending(
        self,
        conversation_id: str,
        drafts: Sequence[EventDraft],
        *,
        next_seq: int,
        state_after: Callable[[list[Event]], FsmState],
        now: datetime,
    ) -> Iterator[tuple[ConversationTxn, list[Event]]]:
        """Append drafts where the log ended when read, then write the rest under its lock.

        For a writer that knows where the log ended (`next_seq`) and what it appends before
        it starts: the append takes the lock (inv. 8), one statement instead of `locked`'s
        `SELECT … FOR NO KEY UPDATE` and a closing UPDATE. Raises LogMoved (a Stale), writing
        nothing, if the log moved.
        """
        with begin_write(self.engine) as conn:
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
        finish our step with `finish`, all or nothing. On PostgreSQL one statement
        (`whole_commit`); else, or when that wrote nothing, a transaction that raises
        LogMoved if the log moved and Stale if the step (or its call) is no longer ours.
        """
        if dialects.of(self.engine).one_statement_commit:
            appended = eventlog.as_events(conversation_id, next_seq, drafts)
            with begin_write(self.engine, one_statement=True) as conn:
                moved = whole_commit.commit_whole_txn(
                    conn, appended, next_seq=next_seq, fsm=state_after(appended),
                    step_key=step_key, worker=worker, finish=finish, now=now)
            if moved is not None:
                waiting = isinstance(finish, SeeingInbox) and self.message_waits(conversation_id)
                return Committed(appended, moved, waiting)
        with self.appending(conversation_id, drafts, next_seq=next_seq, state_after=state_after,
                            now=now) as (tx, events):
            waiting = tx.finish(step_key, worker=worker, finish=finish, now=now)
        return Committed(events, tx.conversation, waiting)

    def message_waits(self, conversation_id: str) -> bool:
        """Whether a message waits in the conversation's inbox, as last committed."""
        with begin_read(self.engine, one_snapshot=False) as conn:
            return inbox.inbox_waiting_txn(conn, conversation_id)

    # the steps ledger

    def schedule_and_claim_step(
        self, step: NewStep, *, worker: str, lease_s: float,
        now: datetime | Callable[[], datetime], max_attempts: int, cap: int | None = None,
        alone: bool = False, cap_kinds: tuple[str, ...] | None = None,
    ) -> StepRecord | None:
        """Schedule the step if new and claim it, in one statement (None if it is not ours).

        `alone`: the claimant runs nothing else meanwhile, so it may take a step that must run
        alone (`ledger.runs_alone`), and a death of this attempt is the step's fault.

        With `cap`, the most steps of its tenant (of `cap_kinds`, else of any kind) that may
        run at once: past it, the step is left waiting and comes back with status `waiting`.
        `now` may be the clock, read once a connection is in hand: a lease that started while
        its claim waited for one may run out before its first renewal, and the step is taken
        over again.
        """
        with begin_write(self.engine, one_statement=True) as conn:
            return ledger.schedule_and_claim_step_txn(
                conn, step, worker=worker, lease_s=lease_s,
                now=now() if callable(now) else now, max_attempts=max_attempts, cap=cap,
                alone=alone, cap_kinds=cap_kinds,
            )

    def give_up_step(self, step_key: str, *, max_attempts: int, now: datetime
                     ) -> StepRecord | None:
        """Fail a used-up claimable step permanently; the step as given up, only for the one
        caller that did (its `last_error` what it last raised)."""
        with begin_write(self.engine, one_statement=True) as conn:
            return ledger.give_up_step_txn(conn, step_key, max_attempts=max_attempts, now=now)

    def fault_step(self, step: NewStep, *, error: str, now: datetime, retry_at: datetime
                   ) -> StepRecord | None:
        """Count a fault of a step whose task raised before claiming it, scheduling it if
        new, held until `retry_at`; the step as counted, or None if this task's raise was
        not its attempt to count (it runs, is done, or is held)."""
        with begin_write(self.engine, one_statement=True) as conn:
            return ledger.fault_step_txn(conn, step, error=error, now=now, retry_at=retry_at)

    def heartbeat_step(self, step_key: str, *, worker: str, lease_s: float, now: datetime) -> bool:
        """Renew the lease to now + `lease_s`; False if the step is no longer ours."""
        with begin_write(self.engine, one_statement=True) as conn:
            return ledger.heartbeat_step_txn(
                conn, step_key, worker=worker, lease_s=lease_s, now=now
            )

    def renew_leases(
        self, held: list[tuple[str, str]], *, lease_s: float, now: datetime
    ) -> set[str]:
        """Renew the leases of `held` (step_key, worker) to now + `lease_s` in one statement;
        the step keys that are still ours."""
        with begin_write(self._leases(), one_statement=True) as conn:
            return ledger.renew_leases_txn(conn, held, lease_s=lease_s, now=now)

    def list_owned_steps(self, held: list[tuple[str, str]]) -> set[str]:
        """The step keys of `held` (step_key, worker) still running under that worker."""
        with begin_read(self._leases(), one_snapshot=False) as conn:
            return ledger.list_owned_txn(conn, held)

    def _leases(self) -> Engine:
        """A connection of its own for the lease keeper: a renewal must not queue behind
        the steps of a busy process for a pooled connection while their leases run out."""
        if self._lease_engine is None:
            self._lease_engine = dialects.of(self.engine).lease_engine(self.engine)
        return self._lease_engine

    def release_step(
        self, step_key: str, *, worker: str, status: str, now: datetime, error: str | None = None,
        fault: bool = False,
    ) -> bool:
        """End our attempt as failed_recoverable, failed_permanent, timeout or cancelled;
        with `fault`, the attempt counts against the step (it raised)."""
        with begin_write(self.engine, one_statement=True) as conn:
            return ledger.release_step_txn(
                conn, step_key, worker=worker, status=status, now=now, error=error, fault=fault
            )

    def hold_step(
        self, step: NewStep, *, until: datetime, reason: str, now: datetime,
        worker: str | None = None, occurrence: Occurrence | None = None,
    ) -> bool:
        """Hold the step until `until`, scheduling it if new; True if the hold moved later.

        With `worker`, the step is ours and running: it is given back first, its attempt
        uncounted. With `occurrence`, the hold's webhook deliveries commit with it.
        """
        with begin_write(self.engine) as conn:
            if worker is None:
                ledger.schedule_step_txn(conn, step, now=now)
            held = ledger.hold_step_txn(conn, step.step_key, until=until, reason=reason,
                                        worker=worker)
            if held and occurrence is not None:
                record_outbox_txn(conn, tenant=step.tenant, conversation_id=step.conversation_id,
                                  occurrences=[occurrence], now=now)
            return held

    def add_step_retry(self, step_key: str) -> None:
        """Count one more retry of the step."""
        with begin_write(self.engine, one_statement=True) as conn:
            ledger.add_step_retry_txn(conn, step_key)

    def load_step(self, step_key: str) -> StepRecord | None:
        with begin_read(self.engine, one_snapshot=False) as conn:
            return ledger.load_step_txn(conn, step_key)

    def list_steps(self, conversation_id: str) -> list[StepRecord]:
        """Steps of the conversation, oldest first."""
        with begin_read(self.engine, one_snapshot=False) as conn:
            return ledger.list_steps_txn(conn, conversation_id)

    def list_stale_steps(
        self, *, now: datetime, scheduled_before: datetime, limit: int = 100
    ) -> list[tuple[StepRecord, str | None]]:
        """Running steps past their lease, and ready ones created before `scheduled_before`,
        each with its tool's name (None for steps of other kinds)."""
        with begin_read(self.engine, one_snapshot=False) as conn:
            return backlog.list_stale_steps_txn(
                conn, now=now, scheduled_before=scheduled_before, limit=limit
            )

    def next_waiting_step(
        self, tenant: str, kinds: tuple[str, ...] | None = None, *, others: bool = False
    ) -> tuple[StepRecord, str | None] | None:
        """The tenant's step (of `kinds`, else of any) that has waited longest for a slot,
        with its tool's name; with `others`, that of any other tenant."""
        with begin_read(self.engine, one_snapshot=False) as conn:
            return backlog.next_waiting_step_txn(conn, tenant, kinds, others=others)

    def next_waiting_steps(
        self, tenant: str, kinds: tuple[str, ...] | None
    ) -> list[tuple[StepRecord, str | None]]:
        """What a freed slot of `tenant` wakes, in one read: its step that has waited
        longest (of `kinds`, else of any) and, with `kinds`, that of any other tenant."""
        with begin_read(self.engine, one_snapshot=False) as conn:
            return backlog.next_waiting_steps_txn(conn, tenant, kinds)

    def list_waiting_steps(
        self, *, now: datetime, per_tenant: int = 100
    ) -> tuple[dict[str, int], list[tuple[StepRecord, str | None]]]:
        """Per tenant with waiting steps: its steps running now, and its first waiting ones."""
        with begin_read(self.engine) as conn:
            return backlog.list_waiting_steps_txn(conn, now=now, per_tenant=per_tenant)

    def delete_finished_steps(self, *, finished_before: datetime) -> int:
        """Delete finished steps (not failed_recoverable ones) older than `finished_before`."""
        with begin_write(self.engine, one_statement=True) as conn:
            return ledger.delete_finished_steps_txn(conn, finished_before=finished_before)

    # the model-call audit

    def record_model_call(self, record: ModelCallRecord) -> None:
        """Write one `model_calls` row: the request body exactly as sent, and its cost."""
        with begin_write(self.engine) as conn:
            audit.insert_model_call_txn(conn, record)

    def list_model_calls(self, conversation_id: str) -> list[ModelCallRecord]:
        """The conversation's audited model calls, oldest first."""
        with begin_read(self.engine, one_snapshot=False) as conn:
            return audit.list_model_calls_txn(conn, conversation_id)

    def delete_model_calls(self, *, before: datetime) -> int:
        """Delete audit rows older than `before` (their TTL); returns how many."""
        with begin_write(self.engine) as conn:
            return audit.delete_model_calls_txn(conn, before=before)

