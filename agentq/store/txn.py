"""ConversationTxn: every write to one conversation, made while its row is locked (inv. 8)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from agentq.core.agent_tools import Parent
from agentq.core.agents import AgentRef
from agentq.core.events import Event, EventDraft, FsmState, InboxItem, ToolCallRecord, View
from agentq.core.fsm import fold
from agentq.core.handoffs import holder_ref
from agentq.core.settings import Settings
from agentq.core.token_budgets import meters_of
from agentq.core.usage import Tokens
from agentq.errors import Stale
from agentq.store import step_commit
from agentq.store.budget_totals import add_totals_txn
from agentq.store.calls import (
    answer_txn,
    approve_edited_txn,
    ask_txn,
    await_outcome_txn,
    load_call_txn,
    mark_started_txn,
    put_calls_txn,
    transition_call_txn,
)
from agentq.store.conversations import (
    ConversationInfo,
    load_conversation_txn,
    set_status_txn,
)
from agentq.store.eventlog import append_txn, save_summary_txn, start_child_txn
from agentq.store.inbox import (
    add_inbox_txn,
    find_inbox_by_key_txn,
    inbox_waiting_txn,
    take_inbox_txn,
)
from agentq.store.ledger import (
    NewStep,
    StepRecord,
    cancel_open_steps_txn,
    cancel_waiting_steps_txn,
    finish_step_txn,
)
from agentq.store.turn_usage import TurnRef, add_turn_txn
from agentq.store.usage import UsageKey, add_usage_txn, usage_key
from agentq.store.views import load_view_txn
from agentq.store.whole_commit import ClosingCall, Finish, Scheduling


class ConversationTxn:
    """One open transaction holding the conversation's lock; only valid inside `Writes.locked`."""

    def __init__(self, conn: Connection, conversation: ConversationInfo) -> None:
        self._conn = conn
        self.conversation = conversation

    @property
    def _id(self) -> str:
        return self.conversation.id

    def append(
        self,
        drafts: Sequence[EventDraft],
        *,
        state_after: Callable[[list[Event]], FsmState] | None = None,
        now: datetime | None = None,
    ) -> list[Event]:
        """Append drafts at the end of the log and return them as events.

        `state_after(events)` is the cached state to keep with them (inv. 1), written in
        the same UPDATE that moves `next_seq`.
        """
        appended, self.conversation = append_txn(
            self._conn, self.conversation, drafts, state_after=state_after, now=now
        )
        return appended

    def append_and_fold(
        self, drafts: Sequence[EventDraft], *, now: datetime
    ) -> tuple[list[Event], FsmState]:
        """Append drafts and fold them onto the cached state (inv. 1): what every writer does."""
        cached = self.conversation.fsm
        events = self.append(drafts, state_after=lambda appended: fold(appended, cached), now=now)
        return events, self.conversation.fsm

    def view(self) -> View:
        """The current turn's view as this transaction sees it, own writes included."""
        view = load_view_txn(self._conn, self._id, turn_only=True)
        assert view is not None, "the locked row cannot vanish"
        return view

    def add_usage(self, model: str | None, tokens: Tokens, *, now: datetime,
                  cost_nanos: int = 0, turn: TurnRef | None = None) -> None:
        """Count model calls' tokens and cost in the rollups, the budgets' running totals and
        their turn's row, with this transaction's writes."""
        key = self._usage_key(model)
        add_usage_txn(self._conn, key, tokens, at=now, cost_nanos=cost_nanos)
        self._add_totals(key, tokens, now, cost_nanos)
        if turn is not None:
            add_turn_txn(self._conn, key, turn, tokens, cost_nanos, at=now)

    def _add_totals(self, key: UsageKey, tokens: Tokens, now: datetime, cost_nanos: int
                    ) -> None:
        add_totals_txn(self._conn, key.tenant, meters_of(key.agent, key.conversation_id, now),
                       tokens.total, cost_nanos)

    def _usage_key(self, model: str | None) -> UsageKey:
        c = self.conversation
        return usage_key(c.id, tenant=c.tenant, settings=c.settings,
                         agent=holder_ref(c.fsm, c.agent), parent=c.parent, model=model)

    def put_tool_calls(self, records: Sequence[ToolCallRecord]) -> None:
        put_calls_txn(self._conn, records)

    def load_call(self, call_id: str) -> ToolCallRecord | None:
        return load_call_txn(self._conn, self._id, call_id)

    def transition_call(
        self,
        call_id: str,
        *,
        from_statuses: Sequence[str],
        to_status: str,
        now: datetime,
        result: Any = None,
    ) -> bool:
        """Move a call from one of `from_statuses` to `to_status`; False if it was elsewhere."""
        return transition_call_txn(
            self._conn,
            self._id,
            call_id,
            from_statuses=from_statuses,
            to_status=to_status,
            now=now,
            result=result,
        )

    def ask(self, call_id: str, *, elicitation: dict[str, Any], expires_at: datetime) -> bool:
        """A scheduled call waits for a person's answer to its server's question; False if
        it was no longer scheduled."""
        return ask_txn(self._conn, self._id, call_id, elicitation=elicitation,
                       expires_at=expires_at)

    def answer(self, call_id: str, *, elicitation: dict[str, Any]) -> bool:
        """A pending call a person answered is scheduled again; False if it was no longer
        pending."""
        return answer_txn(self._conn, self._id, call_id, elicitation=elicitation)

    def mark_started(self, call_id: str, *, started: dict[str, Any],
                     statuses: Sequence[str] = ("scheduled",)) -> bool:
        """Write a `once` call's start mark; False if the call was not in `statuses`."""
        return mark_started_txn(self._conn, self._id, call_id, started=started,
                                statuses=statuses)

    def await_outcome(self, call_id: str, *, started: dict[str, Any],
                      expires_at: datetime | None = None) -> bool:
        """A `once` call whose run was found unfinished waits for a person, with no
        deadline unless a schedule's run nobody attends sets one; False if it was no
        longer scheduled."""
        return await_outcome_txn(self._conn, self._id, call_id, started=started,
                                 expires_at=expires_at)

    def approve_edited(self, call_id: str, *, args: dict[str, Any],
                       model_args: dict[str, Any]) -> bool:
        """A pending call runs with the arguments a person edited; False if it was no
        longer pending."""
        return approve_edited_txn(self._conn, self._id, call_id, args=args,
                                  model_args=model_args)

    def set_status(self, status: str, *, now: datetime) -> None:
        set_status_txn(self._conn, self._id, status, now=now)
        self.conversation = replace(self.conversation, status=status, updated_at=now)

    def add_inbox(
        self, item: InboxItem, *, queued: bool, turn_id: str | None, taken_at: datetime | None
    ) -> None:
        add_inbox_txn(self._conn, item, queued=queued, turn_id=turn_id, taken_at=taken_at)

    def find_inbox_by_key(self, idempotency_key: str) -> dict[str, Any] | None:
        """{"message_id", "turn_id", "queued"} of the message with that key, else None."""
        return find_inbox_by_key_txn(self._conn, self._id, idempotency_key)

    def inbox_waiting(self) -> bool:
        """Whether a message of this conversation waits in the inbox."""
        return inbox_waiting_txn(self._conn, self._id)

    def take_inbox(self, item_id: str, *, turn_id: str, now: datetime) -> bool:
        return take_inbox_txn(self._conn, self._id, item_id, turn_id=turn_id, now=now)

    def save_summary(
        self, *, from_seq: int, to_seq: int, content: dict[str, Any], version: int, now: datetime
    ) -> bool:
        """Insert a summary beside the compact step's finish; False if that `to_seq` has one."""
        return save_summary_txn(
            self._conn,
            conversation_id=self._id,
            from_seq=from_seq,
            to_seq=to_seq,
            content=content,
            version=version,
            now=now,
        )

    def finish_step(self, step_key: str, *, worker: str, now: datetime) -> bool:
        """Mark our running step succeeded; False means we lost it and must roll back."""
        return finish_step_txn(self._conn, self._id, step_key, worker=worker, now=now)

    def finish(self, step_key: str, *, worker: str, finish: Finish, now: datetime) -> bool:
        """Finish our step as `finish` says (`Writes.commit_step`): whether a message waits,
        for a turn's last step. Raises Stale, to roll back, if the step (or its call) is no
        longer ours."""
        if isinstance(finish, ClosingCall):
            finished, closed = self.finish_closing_call(
                step_key, worker=worker, call_id=finish.call_id, result=finish.result, now=now)
            if finished and not closed:
                raise Stale("the call was closed meanwhile")
            waiting = False
        elif isinstance(finish, Scheduling):
            finished, waiting = self.finish_scheduling(
                step_key, worker=worker, calls=finish.calls, scheduled=finish.scheduled,
                now=now, usage=finish.usage), False
        else:
            finished, waiting = self.finish_seeing_inbox(step_key, worker=worker, now=now,
                                                         usage=finish.usage)
        if not finished:
            raise Stale("the step is no longer ours")
        for counted in () if isinstance(finish, ClosingCall) else finish.also:
            step_commit.count_usage_txn(self._conn, counted)
        return waiting

    def finish_closing_call(
        self, step_key: str, *, worker: str, call_id: str, result: Any, now: datetime
    ) -> tuple[bool, bool]:
        """Finish our step and close its scheduled call as done with `result`: (the step was
        ours, the call was open); roll back unless both."""
        return step_commit.finish_closing_call_txn(
            self._conn, self._id, step_key, worker=worker, call_id=call_id, result=result, now=now
        )

    def finish_scheduling(
        self, step_key: str, *, worker: str, calls: Sequence[ToolCallRecord],
        scheduled: Sequence[NewStep], now: datetime, usage: step_commit.Usage = None,
    ) -> bool:
        """Finish our step, insert the round's calls and schedule their steps, and count
        `usage` (`usage()`); False means we lost the step and must roll back."""
        return step_commit.finish_scheduling_txn(
            self._conn, self._id, step_key, worker=worker, calls=calls, scheduled=scheduled,
            now=now, usage=usage,
        )

    def finish_seeing_inbox(self, step_key: str, *, worker: str, now: datetime,
                            usage: step_commit.Usage = None) -> tuple[bool, bool]:
        """Finish our step, count `usage` (`usage()`) and look whether a message waits:
        (the step was ours, one waits)."""
        return step_commit.finish_seeing_inbox_txn(self._conn, self._id, step_key, worker=worker,
                                                   now=now, usage=usage)

    def start_child(self, child_id: str, *, settings: Settings, agent: AgentRef, parent: Parent,
                    first: EventDraft, now: datetime) -> bool:
        """Insert a sub-agent's child conversation with its first message, in this
        transaction, unless it exists (inv. 5: a conflict means it was started); whether it
        was inserted now."""
        return start_child_txn(self._conn, ConversationInfo(
            id=child_id, tenant=self.conversation.tenant, settings=settings, fsm=FsmState(),
            status="active", next_seq=1, created_at=now, updated_at=now, agent=agent,
            parent=parent), first, now=now)

    def child(self, child_id: str) -> ConversationTxn | None:
        """The child conversation `child_id`, locked in this transaction (a parent locks its
        children, never the other way round); None if it was never started."""
        info = load_conversation_txn(self._conn, child_id, lock=True)
        return None if info is None else ConversationTxn(self._conn, info)

    def cancel_open_steps(self, *, kinds: tuple[str, ...], now: datetime) -> list[StepRecord]:
        """Cancel this conversation's unfinished steps of `kinds`; returns them as they were."""
        return cancel_open_steps_txn(self._conn, self._id, kinds=kinds, now=now)

    def cancel_waiting_steps(self, *, now: datetime) -> int:
        """Cancel this conversation's steps that wait for a slot, so none keeps its place."""
        return cancel_waiting_steps_txn(self._conn, self._id, now=now)
