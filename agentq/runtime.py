"""What a worker does: advance a conversation, run a tool, expire a call, sweep.

Each entry point is load → decide → claim → run → commit (one transaction) and returns
follow-ups; `worker.enqueue` sends them. Nothing here imports Celery, so the whole
runtime runs in tests on SQLite with no broker.
"""
from __future__ import annotations

import contextvars
import logging
import os
import socket
import threading
import uuid
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Callable, Iterator, Sequence

from agentq.background import Timers
from agentq.breakers import CircuitBreakers, board_for
from agentq.config import Config
from agentq.core.breaker import BreakerPolicy
from agentq.core import drafts
from agentq.core.decide import (
    AwaitInput,
    CallModel,
    FailTurn,
    Idle,
    RunTools,
    StartTurn,
    Step,
    Stopped,
    decide,
)
from agentq.core.events import Event, EventDraft, FsmState, InboxItem, View
from agentq.core.fsm import fold, round_closed
from agentq.core.keys import task_id as step_task_id
from agentq.core.budget import Context, plan_context
from agentq.core.timefmt import format_ts
from agentq.errors import Stale
from agentq.followups import Advance, Expire, FollowUp, RunTool
from agentq.lease import Heartbeat, renewal
from agentq.logs import bind as bind_log_context
from agentq.compact_step import run_compaction
from agentq.model_round import call_model
from agentq.providers.base import Provider, provider_for
from agentq.pubsub import PubSub
from agentq.store import StepRecord, Store
from agentq.tools import SYSTEM_SCOPE, Registry, Scope, ToolContext

log = logging.getLogger(__name__)

# Notices of the running task, held until it has sent its follow-ups (Runtime.notices_held).
_HELD_NOTICES: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar(
    "agentq_held_notices", default=None
)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def worker_id() -> str:
    """host:pid:thread — unique per claimant, so a lease knows its owner."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


class Runtime:
    """The worker side of agentq, wired to one store, registry and pub/sub."""

    def __init__(
        self,
        *,
        store: Store,
        registry: Registry,
        pubsub: PubSub,
        config: Config,
        clock: Callable[[], datetime] = utcnow,
        providers: Callable[..., Provider] = provider_for,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.store = store
        self.registry = registry
        self.pubsub = pubsub
        self.config = config
        self.clock = clock
        self.providers = providers
        self._sleep = sleep
        self.timers = Timers()  # leases and time limits of this process's steps
        policy = BreakerPolicy(failures_to_open=config.breaker_failures,
                               open_s=config.breaker_open_s)
        self.breakers = CircuitBreakers(board_for(pubsub.url, pubsub.client, store), policy, clock)

    # -- advance ---------------------------------------------------------------------------

    def advance(self, conversation_id: str, *, task_id: str | None = None) -> list[FollowUp]:
        """Decide the next step of one conversation and run it (DESIGN section 2).

        `task_id` is the Celery task running this, recorded on the step it claims so the
        ledger and Flower name the same task.
        """
        with self.store.snapshot(conversation_id) as snapshot:
            view = snapshot.view(turn_only=True)
            if view is None:
                return []
            decision = decide(view)
            if isinstance(decision, CallModel):  # only a model call pays for reading history
                view = snapshot.with_history(view)
        match decision:
            case Idle() | Stopped():
                return []
            case StartTurn(item=item):
                return self._start_turn(view, item)
            case CallModel(step=step):
                return call_model(self, view, step, task_id=task_id)
            case RunTools(steps=steps):
                return self._dispatch_tools(view, steps)
            case AwaitInput(expiries=expiries):
                return self._arm_expiries(view, expiries)
            case FailTurn(code=code, message=message):
                return self._fail_turn(view, code, message)
        raise AssertionError(f"unhandled decision {decision!r}")

    def _start_turn(self, view: View, item: InboxItem) -> list[FollowUp]:
        """Drain one inbox message into a new turn (inv. 2: only at a turn boundary)."""
        now = self.clock()
        turn_id = str(uuid.uuid4())
        try:
            with self.store.locked(view.conversation_id) as tx:
                if tx.conversation.fsm.state in ("running", "awaiting_input"):
                    raise Stale("a turn is still running")
                if not tx.take_inbox(item.id, turn_id=turn_id, now=now):
                    raise Stale("the inbox message was already taken")
                draft = drafts.user_msg(
                    item.content.get("text", ""),
                    turn_id=turn_id,
                    message_id=item.id,
                    scope=item.scope,
                    created_at=item.created_at,
                )
                events, _ = self.append(tx, [draft])
        except Stale:
            return []
        self.notify(view.conversation_id, events)
        return [Advance(view.conversation_id)]

    def _fail_turn(self, view: View, code: str, message: str) -> list[FollowUp]:
        now = self.clock()
        try:
            with self.store.locked(view.conversation_id) as tx:
                if tx.conversation.next_seq - 1 != view.last_seq:
                    raise Stale("the log moved")
                draft = drafts.error(
                    code, message, status="failed_permanent", step_key=None,
                    turn_id=tx.conversation.fsm.turn_id, round_id=None, created_at=now,
                )
                events, _ = self.append(tx, [draft])
        except Stale:
            return []
        self.notify(view.conversation_id, events)
        return []

    # -- model calls -----------------------------------------------------------------------

    def context(self, view: View) -> Context:
        """The request the next model call gets (and what was shortened in it), or the
        compaction due before it."""
        return plan_context(view, self.registry.specs(view.settings.tools))

    # -- compaction ------------------------------------------------------------------------

    def compact(self, conversation_id: str, to_seq: int, *, task_id: str | None = None) -> list[FollowUp]:
        """Summarize the log through `to_seq` (the model call waits for it), then advance."""
        view = self.store.load_view(conversation_id)
        if view is None or to_seq > view.last_seq:
            return []
        if view.summary is not None and view.summary.to_seq >= to_seq:
            return [Advance(conversation_id)]  # done already; its advance may have been lost
        return run_compaction(self, view, to_seq, task_id=task_id)

    # -- tool steps ------------------------------------------------------------------------

    def _dispatch_tools(self, view: View, steps: Sequence[Step]) -> list[FollowUp]:
        """One run_tool task per open server call; the ledger makes repeats harmless."""
        cid = view.conversation_id
        return [RunTool(cid, step.ref["tool_call_id"], step.key) for step in steps]

    def run_tool(self, conversation_id: str, tool_call_id: str) -> list[FollowUp]:
        """Run one server tool call once, and commit its result (inv. 3, 5)."""
        found = self.store.load_call_and_conversation(conversation_id, tool_call_id)
        if found is None or found[1].status != "scheduled":
            return []
        conversation, call = found
        step = Step.tool(conversation_id, tool_call_id)
        worker, record = self.claim(conversation_id, step)
        if record is None:
            return self.not_claimed(conversation_id, step)
        tool = self.registry.get(call.name)
        timeout_s = (tool.timeout if tool and tool.timeout else None) or (
            conversation.settings.limits.tool_timeout_s
        )
        scope = Scope.from_json(conversation.fsm.scope) if conversation.fsm.scope else SYSTEM_SCOPE
        ctx = ToolContext(tool_call_id, conversation_id, scope)
        renew = renewal(self.store, step.key, worker, self.config.lease_s, self.clock)
        with Heartbeat(renew, timers=self.timers, lease_s=self.config.lease_s):
            outcome = self.registry.call(call.name, call.args, ctx, timeout_s=timeout_s)
        now = self.clock()
        try:
            with self.store.locked(conversation_id) as tx:
                if not tx.finish_step(step.key, worker=worker, now=now):
                    raise Stale("the step is no longer ours")
                result = {"status": outcome.status, "output": outcome.output}
                if not tx.transition_call(
                    tool_call_id, from_statuses=["scheduled"], to_status="done", now=now,
                    result=result,
                ):
                    raise Stale("the call was closed meanwhile")
                events, fsm = self.append(tx, [drafts.tool_result(
                    tool_call_id, outcome.status, outcome.output, turn_id=call.turn_id,
                    round_id=call.round_id, step_key=step.key, created_at=now,
                )])
        except Stale:
            self.store.release_step(step.key, worker=worker, status="cancelled", now=now)
            return []
        self.notify(conversation_id, events)
        log.info("step committed: %s returned %s", call.name, outcome.status,
                 extra={"status": "succeeded"})
        return self._after_result(conversation_id, fsm)

    # -- pending calls ---------------------------------------------------------------------

    def _arm_expiries(self, view: View, expiries: Sequence[Step]) -> list[FollowUp]:
        now = self.clock()
        by_id = {c.id: c for c in view.open_calls}
        follow: list[FollowUp] = []
        for step in expiries:
            call = by_id.get(step.ref["tool_call_id"])
            if call is not None and call.expires_at is not None:
                follow.append(Expire(
                    view.conversation_id, call.id, step.key, self.eta(call.expires_at, now)
                ))
        return follow

    def expire(self, conversation_id: str, tool_call_id: str) -> list[FollowUp]:
        """Expire a pending call if it is due; re-arm if not (DESIGN section 6, Expiry)."""
        call = self.store.load_tool_call(conversation_id, tool_call_id)
        if call is None or call.status != "pending" or call.expires_at is None:
            return []
        now = self.clock()
        key = Step.expire(conversation_id, tool_call_id).key
        if call.expires_at > now:
            return [Expire(conversation_id, tool_call_id, key, self.eta(call.expires_at, now))]
        try:
            with self.store.locked(conversation_id) as tx:
                # conditional: a resolution that won the race leaves nothing to expire
                if not tx.transition_call(
                    tool_call_id, from_statuses=["pending"], to_status="expired", now=now,
                    result={"status": "expired", "output": None},
                ):
                    raise Stale("the call is no longer pending")
                events, fsm = self.append(tx, close_call_drafts(
                    call, "expired", f"no answer before {format_ts(call.expires_at)}",
                    by="system", now=now,
                ))
        except Stale:
            return []
        self.notify(conversation_id, events)
        return self._after_result(conversation_id, fsm)

    # -- repair ----------------------------------------------------------------------------

    def sweep(self) -> list[FollowUp]:
        """Re-drive what the broker lost: overdue calls, stale steps, stalled conversations."""
        now = self.clock()
        follow: list[FollowUp] = []
        for call in self.store.list_overdue_calls(now=now):
            key = Step.expire(call.conversation_id, call.id).key
            follow.append(Expire(call.conversation_id, call.id, key, None))
        grace = timedelta(seconds=self.config.sweep_s)
        for step in self.store.list_stale_steps(now=now, scheduled_before=now - grace):
            if step.kind == "tool":
                follow.append(RunTool(step.conversation_id, step.ref["tool_call_id"], step.step_key))
            else:
                follow.append(Advance(step.conversation_id))
        for conversation_id in self.store.list_stalled_conversations(updated_before=now - grace):
            follow.append(Advance(conversation_id))
        return list(dict.fromkeys(follow))

    def gc(self, *, keep_s: float = 7 * 24 * 3600) -> int:
        """Drop finished step rows older than `keep_s` and audit rows past their TTL.

        The log keeps the story; both of these are bookkeeping. Returns rows dropped.
        """
        now = self.clock()
        steps = self.store.delete_finished_steps(finished_before=now - timedelta(seconds=keep_s))
        audits = self.store.delete_model_calls(
            before=now - timedelta(seconds=self.config.audit_ttl_s)
        )
        return steps + audits

    # -- shared ----------------------------------------------------------------------------

    def claim(
        self, cid: str, step: Step, task_id: str | None = None
    ) -> tuple[str, StepRecord | None]:
        """Schedule the step if new and claim it for this worker; the record if we won.

        The ledger records `task_id`, the Celery task that runs the step (by default the
        step's own deterministic task id, which tool tasks are sent with).
        """
        worker = worker_id()
        record = self.store.schedule_and_claim_step(
            step_key=step.key, conversation_id=cid, kind=step.kind, ref=step.ref,
            round_id=step.round_id, celery_task_id=task_id or step_task_id(step.key),
            worker=worker,
            lease_s=self.config.lease_s, now=self.clock(), max_attempts=self.config.max_attempts,
        )
        bind_log_context(conversation_id=cid, step_key=step.key, step_kind=step.kind,
                         round_id=step.round_id)
        if record is not None:
            log.info("step claimed", extra={"attempt": record.attempts})
        return worker, record

    def release(self, step: Step, worker: str, status: str, error: str | None) -> None:
        """Give a claimed step back with `status` (a no-op if it is no longer ours)."""
        log.info("step released as %s%s", status, f": {error}" if error else "",
                 extra={"status": status})
        self.store.release_step(step.key, worker=worker, status=status, now=self.clock(),
                                error=error)

    def sleep_option(self) -> dict:
        return {"sleep": self._sleep} if self._sleep else {}

    def not_claimed(self, conversation_id: str, step: Step) -> list[FollowUp]:
        """Another worker holds the step, or it is done, or it is poison (attempts used up)."""
        now = self.clock()
        if not self.store.give_up_step(step.key, max_attempts=self.config.max_attempts, now=now):
            return []
        log.warning("step given up after %d attempts", self.config.max_attempts,
                    extra={"status": "failed_permanent"})
        message = (
            f"the step failed {self.config.max_attempts} times "
            "(its worker died or it kept failing); giving up"
        )
        if step.kind == "tool":  # a poison tool fails its call, not the conversation
            return self._fail_call(conversation_id, step.ref["tool_call_id"], message)
        return self._error_event(conversation_id, step, "failed_permanent", "max_attempts", message)

    def _fail_call(self, conversation_id: str, tool_call_id: str, message: str) -> list[FollowUp]:
        """Close a server call with an error result the model can read."""
        now = self.clock()
        try:
            with self.store.locked(conversation_id) as tx:
                call = tx.load_call(tool_call_id)
                result = {"status": "error", "output": message}
                if call is None or not tx.transition_call(
                    tool_call_id, from_statuses=["scheduled"], to_status="done", now=now,
                    result=result,
                ):
                    raise Stale("the call is no longer open")
                events, fsm = self.append(tx, [drafts.tool_result(
                    tool_call_id, "error", message, turn_id=call.turn_id, round_id=call.round_id,
                    step_key=None, created_at=now,
                )])
        except Stale:
            return []
        self.notify(conversation_id, events)
        return self._after_result(conversation_id, fsm)

    def fail_step(self, conversation_id: str, step: Step, worker: str, status: str, code: str,
                   message: str) -> list[FollowUp]:
        """Release the step as failed and record why in the log (the turn fails with it)."""
        log.warning("step failed as %s (%s): %s", status, code, message, extra={"status": status})
        self.store.release_step(step.key, worker=worker, status=status, now=self.clock(),
                                error=message)
        return self._error_event(conversation_id, step, status, code, message)

    def _error_event(self, conversation_id: str, step: Step, status: str, code: str,
                     message: str) -> list[FollowUp]:
        now = self.clock()
        with self.store.locked(conversation_id) as tx:
            events, _ = self.append(tx, [drafts.error(
                code, message, status=status, step_key=step.key,
                turn_id=tx.conversation.fsm.turn_id, round_id=step.round_id, created_at=now,
            )])
        self.notify(conversation_id, events)
        return []

    def _after_result(self, conversation_id: str, fsm: FsmState) -> list[FollowUp]:
        """Whoever commits the last open result of a round asks for the next model call."""
        return [Advance(conversation_id)] if round_closed(fsm) else []

    def append(self, tx, new_drafts: Sequence[EventDraft]) -> tuple[list[Event], FsmState]:
        """Append under the lock and keep the cached state in step with the log (inv. 1)."""
        return append_events(tx, new_drafts, now=self.clock())

    def notify(self, conversation_id: str, events: Sequence[Event]) -> None:
        """Tell streams that `events` are in the log (now, or when `notices_held` ends)."""
        if not events:
            return
        held = _HELD_NOTICES.get()
        if held is None:
            self.pubsub.publish(conversation_id, "events", {"last_seq": events[-1].seq})
        else:
            held[conversation_id] = max(held.get(conversation_id, 0), events[-1].seq)

    @contextmanager
    def notices_held(self) -> Iterator[None]:
        """Publish the block's notices when it ends, the newest per conversation.

        A task holds them while it commits and sends its follow-ups: the next step's task
        goes out first, and a notice (a Redis round trip) no longer delays it. A stream
        reads the log itself on a notice, so a later notice loses nothing.
        """
        held: dict[str, int] = {}
        token = _HELD_NOTICES.set(held)
        try:
            yield
        finally:
            _HELD_NOTICES.reset(token)
            for conversation_id, last_seq in held.items():
                self.pubsub.publish(conversation_id, "events", {"last_seq": last_seq})

    def eta(self, expires_at: datetime | None, now: datetime) -> datetime:
        horizon = now + timedelta(seconds=self.config.eta_horizon_s)
        return horizon if expires_at is None else min(expires_at, horizon)


def append_events(tx, new_drafts: Sequence[EventDraft], *, now: datetime):
    """Append drafts and fold them onto the cached state, in the caller's transaction."""
    cached = tx.conversation.fsm
    events = tx.append(new_drafts, state_after=lambda appended: fold(appended, cached), now=now)
    return events, tx.conversation.fsm


def close_call_drafts(call, status: str, output, *, by: str, now: datetime) -> list[EventDraft]:
    """A resolution and the tool_result that closes the call (inv. 3)."""
    result_status = {"resolved": "ok", "errored": "error"}.get(status, status)
    return [
        drafts.resolution(call.id, status, by, turn_id=call.turn_id, round_id=call.round_id,
                          created_at=now),
        drafts.tool_result(call.id, result_status, output, turn_id=call.turn_id,
                           round_id=call.round_id, step_key=None, created_at=now),
    ]
