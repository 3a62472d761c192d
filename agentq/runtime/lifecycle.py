"""The one step lifecycle: claim → heartbeat → run → commit, or release / fail (DESIGN section 5).

A step kind that runs under a claim (llm, compact, tool) is a `StepWork`: what it runs
while its lease is kept, and what it commits. The lifecycle owns the rest: the claim (or
giving up a step whose attempts are used up), the heartbeat, the ladder that turns an
exception into a ledger status (and an `error` event when the turn fails with it), and
the release of a commit that lost its race, and the hold of a step whose endpoint's
circuit breaker opened while it ran.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Generic, TypeVar

from agentq.core.decide import Step
from agentq.core.keys import task_id as step_task_id
from agentq.errors import Stale
from agentq.followups import FollowUp
from agentq.logconfig import bind as bind_log_context
from agentq.providers.errors import CircuitOpen, ProviderError
from agentq.runtime.context import StepContext
from agentq.runtime.leases import Leases
from agentq.runtime.model_call import Cancelled, StepTimedOut
from agentq.store import NewStep

log = logging.getLogger(__name__)

Result = TypeVar("Result")


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


class Deferred(Exception):
    """The step must wait for `followups` (a summary first): it is released to run after them."""

    def __init__(self, reason: str, followups: list[FollowUp]) -> None:
        super().__init__(reason)
        self.followups = followups


class StepWork(ABC, Generic[Result]):
    """One step kind's part of the lifecycle: its work, its commit, and what giving up means."""

    # How often the lease is renewed while the work runs (None: a third of the lease).
    heartbeat_s: float | None = None

    def __init__(self, ctx: StepContext, conversation_id: str, step: Step) -> None:
        self.ctx = ctx
        self.conversation_id = conversation_id
        self.step = step

    @abstractmethod
    def run(self, claim: Claim, lost: threading.Event) -> Result:
        """The work, while the lease is kept; `lost` is set when the step is no longer ours."""

    @abstractmethod
    def commit(self, claim: Claim, result: Result) -> list[FollowUp]:
        """Write the result in one transaction; raise Stale to give the step back instead."""

    def hold(self, claim: Claim, opened: CircuitOpen) -> list[FollowUp]:
        """The endpoint's breaker opened during the step's retries: a model step is held
        until it may call again (`runtime.held`); anything else is retried later."""
        self.ctx.store.release_step(self.step.key, worker=claim.worker,
                                    status="failed_recoverable", now=self.ctx.clock(),
                                    error=opened.message)
        return []

    def give_up(self, message: str) -> list[FollowUp]:
        """The step used up its attempts (a poison step): its turn fails."""
        return self.ctx.record_error(
            self.conversation_id, self.step, "failed_permanent", "max_attempts", message
        )


class Lifecycle:
    """Runs each StepWork under a claim: the only place a step is claimed, released or failed."""

    def __init__(self, ctx: StepContext, leases: Leases) -> None:
        self.ctx = ctx
        self.leases = leases

    def run(self, work: StepWork[Result], *, task_id: str | None = None) -> list[FollowUp]:
        """Claim the step, run it with its lease kept, then commit it or record how it failed.

        `task_id` is the Celery task running the step, recorded on its ledger row (by
        default the step's own deterministic task id, which tool tasks are sent with).
        """
        claim = self.claim(work.conversation_id, work.step, task_id)
        if claim is None:
            return self._not_claimed(work)
        with self.leases.kept(work.step.key, claim.worker, period_s=work.heartbeat_s) as beat:
            try:
                result = work.run(claim, beat.lost)
            except StepTimedOut as exc:
                return self.fail(claim, "timeout", "step_timeout", str(exc))
            except Deferred as exc:
                self.release(claim, "failed_recoverable", str(exc))
                return exc.followups
            except CircuitOpen as exc:
                return work.hold(claim, exc)
            except ProviderError as exc:
                if exc.transient:  # retries exhausted: the sweeper tries again, attempts bound it
                    self.release(claim, "failed_recoverable", str(exc))
                    return []
                return self.fail(claim, "failed_permanent", exc.code, str(exc))
            except Cancelled:
                self.release(claim, "cancelled", None)
                return []
        try:
            return work.commit(claim, result)
        except Stale:  # the conversation moved on (an interrupt, say): nothing was written
            self.ctx.store.release_step(
                work.step.key, worker=claim.worker, status="cancelled", now=self.ctx.clock()
            )
            return []

    def claim(self, conversation_id: str, step: Step, task_id: str | None) -> Claim | None:
        """Schedule the step if new and claim it for this worker; None if we did not win."""
        config = self.ctx.config
        worker = worker_id()
        record = self.ctx.store.schedule_and_claim_step(
            NewStep.of(step, conversation_id, task_id or step_task_id(step.key)),
            worker=worker, lease_s=config.lease_s, now=self.ctx.clock(),
            max_attempts=config.max_attempts,
        )
        bind_log_context(conversation_id=conversation_id, step_key=step.key,
                         step_kind=step.kind, round_id=step.round_id)
        if record is None:
            return None
        log.info("step claimed", extra={"attempt": record.attempts})
        return Claim(conversation_id, step, worker, record.attempts, record.retries)

    def release(self, claim: Claim, status: str, error: str | None) -> None:
        """Give a claimed step back with `status` (a no-op if it is no longer ours)."""
        log.info("step released as %s%s", status, f": {error}" if error else "",
                 extra={"status": status})
        self.ctx.store.release_step(claim.step.key, worker=claim.worker, status=status,
                                    now=self.ctx.clock(), error=error)

    def fail(self, claim: Claim, status: str, code: str, message: str) -> list[FollowUp]:
        """Release the step as failed and record why in the log (the turn fails with it)."""
        log.warning("step failed as %s (%s): %s", status, code, message, extra={"status": status})
        self.ctx.store.release_step(claim.step.key, worker=claim.worker, status=status,
                                    now=self.ctx.clock(), error=message)
        return self.ctx.record_error(claim.conversation_id, claim.step, status, code, message)

    def _not_claimed(self, work: StepWork[Result]) -> list[FollowUp]:
        """Another worker holds the step, or it is done, or it is poison (attempts used up)."""
        max_attempts = self.ctx.config.max_attempts
        if not self.ctx.store.give_up_step(work.step.key, max_attempts=max_attempts,
                                           now=self.ctx.clock()):
            return []
        log.warning("step given up after %d attempts", max_attempts,
                    extra={"status": "failed_permanent"})
        return work.give_up(
            f"the step failed {max_attempts} times (its worker died or it kept failing); giving up"
        )
