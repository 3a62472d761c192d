"""The one step lifecycle: claim → heartbeat → run → commit, or release / fail (docs/design.md §5).

A step kind that runs under a claim (model, compact, tool) is a `StepWork`: what it runs
while its lease is kept, and what it commits. The lifecycle owns the rest: the claim (or
giving up a step whose attempts are used up), the heartbeat, the ladder that turns an
exception into a ledger status (and an `error` event when the turn fails with it), and
the release of a commit that lost its race, and the hold of a step whose call may not go
out yet (its endpoint's circuit breaker opened while it ran, or a token budget is
spent). A tenant's share of the workers is kept here too (inv. 9): a step past its
tenant's cap is left waiting and its task ends at once, and a step that stops running
wakes the one of its tenant that has waited longest (after its task has sent its own
follow-ups, when the task holds the wake-ups: `wakes_held`).

Each attempt is one span (agentq.telemetry), in its turn's trace: a takeover's span links
to the attempt it replaced, whose ids that attempt's claim recorded with its worker, and a
commit that lost its race ends its span as `lost`, never as a second success (inv. 11).

Only what can be the step's own fault counts against it (inv. 11, `agentq.store.ledger`):
a step that raised, or one whose worker died while it ran alone. Whatever it raised, wherever
(inv. 12): the ladder's last rung logs it once and counts it as a fault, and a task that
raised before its claim has it counted against the step it was for
(`agentq.runtime.faults`), so a step that keeps raising fails its turn visibly.

Each step runs within the process's `Admission`: a task waits unclaimed while the process
has no room, a step that died with others runs alone, and a task that comes meanwhile ends
with its step unclaimed: it is sent on at once for another process to take, or, if it comes
back while the step alone still runs, once that has ended (`Lifecycle.wake`).
"""
from __future__ import annotations

import contextvars
import logging
import os
import socket
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

from agentq.core.decide import Step
from agentq.core.keys import task_id as step_task_id
from agentq.errors import Stale
from agentq.followups import FollowUp
from agentq.process.logs import bind as bind_log_context
from agentq.providers.errors import CallWaits, ProviderError
from agentq.runtime.admission import Admission, Gated, Place
from agentq.runtime.context import StepContext
from agentq.runtime.faults import Faults, cause, turn_fails
from agentq.runtime.leases import Leases
from agentq.runtime.model_call import Cancelled, StepTimedOut
from agentq.runtime.repair import redrive, take_up
from agentq.runtime.shares import Shares
from agentq.store import NewStep
from agentq.store.ledger import WAITING, runs_alone
from agentq.telemetry import NoSpan, tracing
from agentq.telemetry.attributes import step_attributes

log = logging.getLogger(__name__)

Result = TypeVar("Result")

# The slots freed by the running task, (tenant, kinds) each, held until it has sent its
# follow-ups (`wakes_held`).
_FREED_SLOTS: contextvars.ContextVar[list[tuple[str, tuple[str, ...] | None]] | None] = (
    contextvars.ContextVar("agentq_freed_slots", default=None))


@contextmanager
def wakes_held() -> Iterator[list[tuple[str, tuple[str, ...] | None]]]:
    """Collect the slots the block's steps free instead of reading at once what they wake;
    the caller wakes them (`Lifecycle.wake`) once the block has sent its follow-ups.

    The next step of the conversation then goes out without waiting for that read (a
    round trip at each step's end under a fair share). A wake-up lost with a task that
    dies in between is the sweeper's, as one that went waiting while this step finished.
    """
    freed: list[tuple[str, tuple[str, ...] | None]] = []
    token = _FREED_SLOTS.set(freed)
    try:
        yield freed
    finally:
        _FREED_SLOTS.reset(token)


# Between a claimant and the ids of its span in the ledger's worker column.
SPAN_MARK = " span="


def worker_id() -> str:
    """host:pid:thread — unique per claimant, so a lease knows its owner."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


@dataclass(frozen=True)
class Claim:
    """A step this worker holds until it commits or releases it."""

    conversation_id: str
    step: Step
    worker: str
    attempts: int  # claims of the step so far, this one included
    retries: int  # model-call retries counted on the step so far
    span: str | None = None  # the ids this attempt's span takes (tracing on)
    replaces: str | None = None  # the ids of the attempt's span it took over from


class Waits:
    """A claim refused for the tenant's cap: the step is left waiting for a slot."""


WAITS = Waits()


class Deferred(Exception):
    """The step must wait for `followups` (a summary first): it is released to run after them."""

    def __init__(self, reason: str, followups: list[FollowUp]) -> None:
        super().__init__(reason)
        self.followups = followups


class StepWork(ABC, Generic[Result]):
    """One step kind's part of the lifecycle: its work, its commit, and what giving up means."""

    # How often the lease is renewed while the work runs (None: a third of the lease).
    heartbeat_s: float | None = None
    # The tool a tool step calls (its task goes to that tool's queue).
    tool: str | None = None
    # Whether a step of its tenant may wait for the slot it holds, as its commit found
    # (`Committed.waited_on`): if not, its end reads nothing for the slot it frees.
    waited_on: bool = True

    def __init__(self, ctx: StepContext, conversation_id: str, tenant: str, step: Step) -> None:
        self.ctx = ctx
        self.conversation_id = conversation_id
        self.tenant = tenant  # whose share of the workers the step runs in
        self.step = step

    @abstractmethod
    def run(self, claim: Claim, lost: threading.Event) -> Result:
        """The work, while the lease is kept; `lost` is set when the step is no longer ours."""

    @abstractmethod
    def commit(self, claim: Claim, result: Result) -> list[FollowUp]:
        """Write the result in one transaction; raise Stale to give the step back instead."""

    def redrive(self) -> FollowUp:
        """The task that takes the step up again when its task was turned away unclaimed."""
        return take_up(self.conversation_id, self.step.kind, self.step.ref, self.step.key,
                       self.tool)

    def hold(self, claim: Claim, opened: CallWaits) -> list[FollowUp]:
        """The step's call may not go out before `opened.until` (its endpoint's breaker
        opened, or a budget is spent): a model step is held until then (`runtime.held`);
        anything else is retried later."""
        self.ctx.store.steps.release(self.step.key, worker=claim.worker,
                                     status="failed_recoverable", now=self.ctx.clock(),
                                     error=opened.message)
        return []

    def turn(self) -> tuple[str | None, str | None]:
        """(turn id, traceparent) of the turn the step works for: its span joins that trace."""
        return None, None

    def give_up(self, message: str) -> list[FollowUp]:
        """The step used up its attempts (a poison step): its turn fails."""
        return turn_fails(self.ctx, self.conversation_id, self.step, message)


class Lifecycle:
    """Runs each StepWork under a claim: the only place a step is claimed, released or failed."""

    def __init__(self, ctx: StepContext, leases: Leases, admission: Admission | None = None
                 ) -> None:
        self.ctx = ctx
        self.leases = leases
        self.admission: Admission[FollowUp] = admission or Admission(
            limit=ctx.config.steps_in_flight, starting=ctx.store.pool_size())
        self.shares = Shares(ctx.store, ctx.clock, ctx.rules.running_steps)
        self.faults = Faults(ctx)

    def run(self, work: StepWork[Result], *, task_id: str | None = None) -> list[FollowUp]:
        """Claim the step, run it with its lease kept, then commit it or record how it failed.

        `task_id` is the Celery task running the step, recorded on its ledger row (by
        default the step's own deterministic task id, which tool tasks are sent with).
        """
        kind = work.step.kind
        cap, kinds = self.shares.cap(work.tenant, kind, self.ctx.rules.queue_of(kind, work.tool))
        try:
            with self.admission.among_others(work.redrive) as place:
                claim = self.claim(work, task_id, cap=cap, cap_kinds=kinds)
                if claim is not None:
                    return self._claimed(work, claim, place, cap, kinds)
        except Gated as gated:  # a step runs alone here: this one goes elsewhere, or later
            return [work.redrive()] if gated.send_now else []
        if not self._must_run_alone(work):
            # not ours to take: if its task was a wake-up, pass it on. Two slots freed at
            # once each read the same first waiting step and wake it; one task claims it
            # and the other finds it taken. Unpassed, that second wake-up would be lost and
            # the next waiting step left to the sweeper (for good, with no beat); passed on,
            # it wakes the next one, which waits again if no slot is free after all.
            return self._not_claimed(work) + self._slot_freed(work.tenant, cap, kinds)
        with self.admission.alone() as place:  # it died with others: its death is its own now
            claim = self.claim(work, task_id, cap=cap, cap_kinds=kinds, alone=True)
            if claim is None:
                return self._not_claimed(work)
            return self._claimed(work, claim, place, cap, kinds)

    def _claimed(self, work: StepWork[Result], claim: Claim | Waits, place: Place,
                 cap: int | None, kinds: tuple[str, ...] | None) -> list[FollowUp]:
        if isinstance(claim, Waits):  # it holds no worker while it waits; a freed slot wakes it
            return []
        followups = self._run_claimed(work, claim, place)
        if not work.waited_on:  # its commit found no step of its tenant waiting (inv. 9)
            return followups
        return followups + self._slot_freed(work.tenant, cap, kinds)

    def _slot_freed(self, tenant: str, cap: int | None, kinds: tuple[str, ...] | None
                    ) -> list[FollowUp]:
        """A slot of `tenant` is free (a step ended, or a wake-up found its step taken):
        what it wakes, unless no share of the workers is kept for such steps."""
        return [] if cap is None and kinds is None else self._woken(tenant, kinds)

    def _must_run_alone(self, work: StepWork[Result]) -> bool:
        """The claim was refused because the step died with others: it runs alone next."""
        record = self.ctx.store.steps.load(work.step.key)
        return record is not None and runs_alone(record, now=self.ctx.clock(),
                                                  max_attempts=self.ctx.config.max_attempts)

    def _run_claimed(self, work: StepWork[Result], claim: Claim, place: Place) -> list[FollowUp]:
        """Run the claimed step and commit it, or record how it failed, with its lease kept.

        Careful: the commit runs under the lease too. On a busy worker it may wait seconds for
        a pooled connection; a lease let go before it would run out meanwhile, the step be
        claimed again and its model called again, and this commit be refused as stale.
        """
        with self.leases.kept(work.step.key, claim.worker, period_s=work.heartbeat_s) as beat, \
                self._span(work, claim) as span:
            try:
                return self._attempt(work, claim, place, beat.lost, span)
            except Exception as exc:  # inv. 12: whatever else it raised is its own fault
                span.outcome("raised")
                span.failed(type(exc).__name__)
                return self._raised(work, claim, exc)

    def _attempt(self, work: StepWork[Result], claim: Claim, place: Place,
                 lost: threading.Event, span: NoSpan) -> list[FollowUp]:
        """Run the step and commit it; each failure the ladder expects becomes its status."""
        try:
            place.started()  # the claim moves forward: this process may claim another
            result = work.run(claim, lost)
        except StepTimedOut as exc:
            span.outcome("timeout")
            return self.fail(claim, "timeout", "step_timeout", str(exc))
        except Deferred as exc:
            span.outcome("deferred")
            self.release(claim, "failed_recoverable", str(exc))
            return exc.followups
        except CallWaits as exc:  # a breaker is open, or a budget spent until it resets
            span.outcome("held")
            return work.hold(claim, exc)
        except ProviderError as exc:
            if exc.transient:  # retries exhausted: the sweeper tries again, faults bound it
                span.outcome("released")
                self.release(claim, "failed_recoverable", str(exc), fault=True)
                return []
            span.outcome("failed")
            return self.fail(claim, "failed_permanent", exc.code, str(exc),
                             details=exc.details)
        except Cancelled:
            span.outcome("cancelled")
            self.release(claim, "cancelled", None)
            return []
        try:
            followups = work.commit(claim, result)
        except Stale:  # the conversation moved on (an interrupt, say): nothing was written
            span.outcome("lost")  # inv. 11: never a second successful span of the step
            self.ctx.store.steps.release(
                work.step.key, worker=claim.worker, status="cancelled", now=self.ctx.clock()
            )
            return []
        span.outcome("succeeded")
        return followups

    def _span(self, work: StepWork[Result], claim: Claim) -> NoSpan:
        """The span of this attempt of the step, in its turn's trace."""
        tracer = tracing()
        if not tracer.enabled:
            return tracer.step(work.step.kind, {}, traceparent=None)
        turn_id, traceparent = work.turn()
        step = work.step
        return tracer.step(step.kind, step_attributes(
            conversation_id=work.conversation_id, tenant=work.tenant, kind=step.kind,
            step_key=step.key, attempt=claim.attempts, turn_id=turn_id, round_id=step.round_id,
        ), traceparent=traceparent, reserved=claim.span, replaces=claim.replaces)

    def claim(
        self, work: StepWork[Result], task_id: str | None, *, cap: int | None,
        cap_kinds: tuple[str, ...] | None = None, alone: bool = False,
    ) -> Claim | Waits | None:
        """Schedule the step if new and claim it for this worker; None if we did not win,
        WAITS if its tenant already runs `cap` steps (of `cap_kinds`, or of any kind), or
        earlier ones wait for a slot. `alone`: this process runs nothing else meanwhile
        (`Admission.alone`)."""
        config, step, cid = self.ctx.config, work.step, work.conversation_id
        worker = worker_id()
        span, replaces = self._span_ids(work)
        if span is not None:
            worker = f"{worker}{SPAN_MARK}{span}"
        new = NewStep.of(step, cid, task_id or step_task_id(step.key), tenant=work.tenant)
        for _look in range(2):
            record = self.ctx.store.steps.schedule_and_claim(
                new, worker=worker, lease_s=config.lease_s, now=self.ctx.clock,
                max_attempts=config.max_attempts, cap=cap, cap_kinds=cap_kinds, alone=alone,
            )
            # Left waiting: its row is written now, so look once more. A step of the tenant
            # that finished meanwhile may have read what its freed slot wakes before the row
            # was there; its finish is seen now. Of two such steps one always sees the other,
            # and no wake-up is lost to the sweeper's next round (or for good, with no beat).
            # Before looking, mark the tenant's running steps: a commit that finds its step
            # unmarked skips that read, so a step marked now wakes this one, and one that
            # finished before is seen by the look (inv. 9, agentq.store.waits).
            if record is None or record.status != WAITING:
                break
            if _look == 0:
                self.ctx.store.steps.mark_waited_on(work.tenant, cap_kinds)
        bind_log_context(conversation_id=cid, step_key=step.key,
                         step_kind=step.kind, round_id=step.round_id)
        if record is None:
            return None
        if record.status == WAITING:
            log.info("step waits for a slot: tenant %s runs %d such steps at once at most",
                     work.tenant, cap, extra={"status": WAITING})
            return WAITS
        log.info("step claimed%s", " to run alone" if alone else "",
                 extra={"attempt": record.attempts})
        return Claim(cid, step, worker, record.attempts, record.retries, span,
                     replaces if record.attempts > 1 else None)

    def _span_ids(self, work: StepWork[Result]) -> tuple[str | None, str | None]:
        """With tracing on: the ids the attempt's span will take, recorded with its claim,
        and those of the attempt it may take over from (read before the claim overwrites
        them). Off: nothing, and no read."""
        tracer = tracing()
        if not tracer.enabled:
            return None, None
        prior = self.ctx.store.steps.load(work.step.key)
        replaces = None
        if prior is not None and prior.worker and SPAN_MARK in prior.worker:
            replaces = prior.worker.rpartition(SPAN_MARK)[2]
        return tracer.reserve(work.turn()[1]), replaces

    def release(self, claim: Claim, status: str, error: str | None, *, fault: bool = False
                ) -> None:
        """Give a claimed step back with `status` (a no-op if it is no longer ours); with
        `fault`, the attempt counts against the step."""
        log.info("step released as %s%s", status, f": {error}" if error else "",
                 extra={"status": status})
        self.ctx.store.steps.release(claim.step.key, worker=claim.worker, status=status,
                                     now=self.ctx.clock(), error=error, fault=fault)

    def fail(self, claim: Claim, status: str, code: str, message: str,
             details: dict | None = None) -> list[FollowUp]:
        """Release the step as failed and record why in the log (the turn fails with it)."""
        log.warning("step failed as %s (%s): %s", status, code, message, extra={"status": status})
        self.ctx.store.steps.release(claim.step.key, worker=claim.worker, status=status,
                                     now=self.ctx.clock(), error=message)
        return self.ctx.record_error(claim.conversation_id, claim.step, status, code, message,
                                     details=details)

    def _woken(self, tenant: str, kinds: tuple[str, ...] | None) -> list[FollowUp]:
        """A slot of `tenant` (on the queue of `kinds`, or on any) is free again: what it
        wakes now, or nothing yet when the task holds its wake-ups (`wakes_held`)."""
        held = _FREED_SLOTS.get()
        if held is None:
            return self.wake([(tenant, kinds)])
        held.append((tenant, kinds))
        return []

    def wake(self, freed: list[tuple[str, tuple[str, ...] | None]]) -> list[FollowUp]:
        """For each freed slot, the step of its tenant that has waited longest for one
        takes it. On a queue shared by default (`kinds`), so may another tenant's: the slot
        is the queue's, and the shares moved.

        A step that went waiting while this one was finishing, unseen here, looked once
        more itself after its row was written (`claim`); a wake-up two freed slots both
        sent to one step is passed on by the task that finds it taken (`run`). The
        sweeper stays the backstop (`repair.sweep`).

        With them, the re-drives of the tasks this process turned away while a step ran
        alone, once none does (`Admission.released`).
        """
        woken = [redrive(*found) for tenant, kinds in dict.fromkeys(freed)
                 for found in self.ctx.store.backlog.next_waiting_steps(tenant, kinds)]
        return woken + self.admission.released()

    def _not_claimed(self, work: StepWork[Result]) -> list[FollowUp]:
        """Another worker holds the step, or it is done, or it is poison (faults used up)."""
        return self.faults.given_up(work.step.key, work.give_up)

    def _raised(self, work: StepWork[Result], claim: Claim, exc: Exception) -> list[FollowUp]:
        """The attempt raised what the ladder does not expect, in its work, its commit or a
        library under them (inv. 12): logged once with its traceback, and released as a
        fault. The sweeper drives it again; its faults bound how often. An attempt that is
        no longer ours (its commit landed before something after it raised, or its lease
        was lost) counts nothing, and its step is driven again at once: whatever it would
        have sent next was not sent."""
        error = cause(exc)
        log.error("step raised %s", error, exc_info=exc, extra={"status": "failed_recoverable"})
        if self.ctx.store.steps.release(work.step.key, worker=claim.worker,
                                        status="failed_recoverable", now=self.ctx.clock(),
                                        error=error, fault=True):
            return []
        return [work.redrive()]
