"""A `once` tool's call in the worker: its start committed before the body runs, and a run
found started and unfinished never run again blindly (agentq.core.once, inv. 13).

The tool step (agentq.runtime.tool_step) hands a `once` call here. The run's start mark is
written under the conversation's lock and committed before the tool body is called. A
step that finds the mark of its run already there is a takeover (a worker killed mid-call,
a redelivered task, the sweeper): it asks the tool's `reconcile`, if it has one, and
otherwise, or when that cannot tell, commits the call as `outcome_unknown`, a pending call
a person answers.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentq.core import drafts, once
from agentq.core.events import ToolCallRecord
from agentq.core.schedules import unattended_deadline
from agentq.errors import Stale
from agentq.followups import FollowUp
from agentq.runtime.context import StepContext
from agentq.runtime.expire_step import expiry
from agentq.tools import Registry, Tool, ToolContext, ToolOutcome
from agentq.tools.reconcile import CannotTell, DidNotRun, Ran

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OutcomeUnknown:
    """A run found started and unfinished that nothing outside could account for."""

    mark: dict[str, Any]
    reason: str | None = None  # why the tool's reconcile could not tell
    status: str = once.OUTCOME_UNKNOWN


# The outcome of a step whose call was closed (an interrupt), or whose run another attempt
# took, before this one started it: its commit gives the step back (Stale), writing nothing.
CLOSED = ToolOutcome("error", "the call was closed before it ran")


class StartMarks:
    """The start mark of one `once` call's current run, written under the conversation's lock."""

    def __init__(self, ctx: StepContext, call: ToolCallRecord, worker: str) -> None:
        self.ctx = ctx
        self.call = call
        self.run = once.run_of(call.started)
        self.worker = worker

    def start(self) -> dict[str, Any] | None | ToolOutcome:
        """Mark the run started, committed before the body runs (None: go on); the mark an
        earlier attempt left, if one started the run; CLOSED if the call is no longer open."""
        now = self.ctx.clock()
        with self.ctx.store.writes.locked(self.call.conversation_id) as tx:
            call = tx.load_call(self.call.id)
            if call is None or call.status != "scheduled":
                return CLOSED
            if once.started_before(call.started, self.run):  # inv. 13: never run blindly
                return call.started
            tx.mark_started(call.id, started=once.start_mark(self.run, worker=self.worker,
                                                             now=now))
        return None

    def restart(self, found: dict[str, Any]) -> bool:
        """The reconcile said the run took no effect: this worker marks it started again,
        unless another attempt moved the mark meanwhile."""
        now = self.ctx.clock()
        with self.ctx.store.writes.locked(self.call.conversation_id) as tx:
            call = tx.load_call(self.call.id)
            if call is None or call.status != "scheduled" or call.started != found:
                return False
            return tx.mark_started(call.id, started=once.start_mark(
                self.run, worker=self.worker, now=now))


def run_once(
    marks: StartMarks, registry: Registry, tool: Tool, ctx: ToolContext, *, timeout_s: float,
    body: Callable[[], ToolOutcome],
) -> ToolOutcome | OutcomeUnknown:
    """The call's outcome: the body's, once its start is committed; the reconcile's, for a
    run an earlier attempt started; or OutcomeUnknown when nothing can tell."""
    started = marks.start()
    if started is None:
        return body()
    if isinstance(started, ToolOutcome):
        return started
    call = marks.call
    log.warning("a run of once tool %s was found started by %s at %s and not finished",
                call.name, started.get("worker"), started.get("started_at"))
    if tool.reconcile is None:
        return OutcomeUnknown(started)
    answer = registry.reconcile(call.name, call.args, ctx, timeout_s=timeout_s)
    match answer:
        case Ran(result=result):
            return ToolOutcome("ok", result)
        case DidNotRun():
            return body() if marks.restart(started) else CLOSED
        case CannotTell(reason=reason):
            return OutcomeUnknown(started, reason or "reconcile could not tell")


def commit_unknown(
    ctx: StepContext, call: ToolCallRecord, found: OutcomeUnknown, *, step_key: str,
    worker: str, description: str | None,
) -> list[FollowUp]:
    """The step ends and the call waits for a person as outcome_unknown, with what they need
    to decide: arguments, start, worker, how long it ran until found, the tool's description;
    in a schedule's run nobody attends, only until the run's rule ends the wait."""
    now = ctx.clock()
    mark = once.found_mark(found.mark, now=now, description=description, reason=found.reason)
    with ctx.store.writes.locked(call.conversation_id) as tx:
        if not tx.finish_step(step_key, worker=worker, now=now):
            raise Stale("the step is no longer ours")
        expires_at = unattended_deadline(tx.conversation.fsm.unattended, now, None)
        if not tx.await_outcome(call.id, started=mark, expires_at=expires_at):
            raise Stale("the call was closed meanwhile")
        events, _ = tx.append_and_fold(
            [drafts.outcome_unknown(call, mark, step_key=step_key, created_at=now)], now=now)
    ctx.notices.notify(call.conversation_id, events)
    log.info("step committed: %s's outcome is unknown, a person decides", call.name,
             extra={"status": "succeeded"})
    return _expiry(ctx, call, expires_at)


def _expiry(ctx: StepContext, call: ToolCallRecord, expires_at: datetime | None
            ) -> list[FollowUp]:
    """The expire task of a wait with a deadline (none: it waits for its person)."""
    if expires_at is None:
        return []
    return [expiry(ctx, call.conversation_id, call.id, expires_at, ctx.clock())]


def unknown_on_give_up(ctx: StepContext, call: ToolCallRecord, *, message: str,
                       description: str | None) -> list[FollowUp] | None:
    """A `once` call whose step is given up (its attempts used up) after its run started
    waits for a person as outcome_unknown instead of failing: the run may have taken effect
    (what to send next: its expiry, in a run nobody attends). None if its run never started
    (or the call is closed): then it fails as any call."""
    now = ctx.clock()
    with ctx.store.writes.locked(call.conversation_id) as tx:
        found = tx.load_call(call.id)
        if found is None or found.status != "scheduled" or not once.started_before(
                found.started, once.run_of(found.started)):
            return None
        assert found.started is not None  # started_before says so
        mark = {**once.found_mark(found.started, now=now, description=description),
                "given_up": message}  # why no attempt is left to find out
        expires_at = unattended_deadline(tx.conversation.fsm.unattended, now, None)
        if not tx.await_outcome(call.id, started=mark, expires_at=expires_at):
            return None
        events, _ = tx.append_and_fold(
            [drafts.outcome_unknown(found, mark, step_key=None, created_at=now)], now=now)
    ctx.notices.notify(call.conversation_id, events)
    return _expiry(ctx, call, expires_at)
