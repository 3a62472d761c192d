"""What raising costs a step (inv. 11, 12): its faults counted, and its turn failed once they
are used up, with the cause named.

The lifecycle's ladder releases a claimed attempt that raised as a fault itself
(`Lifecycle`); this module counts the faults of a task that raised before its claim, gives
up a step whose faults are used up, and words the cause a step's ledger row and its
turn's `error` event carry.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

from agentq.core.decide import Step
from agentq.core.keys import task_id
from agentq.followups import FollowUp
from agentq.runtime.context import StepContext
from agentq.store import ConversationInfo, NewStep
from agentq.store.ledger import CLAIMABLE

log = logging.getLogger(__name__)

# The longest cause of a failure an `error` event names (`cause`).
CAUSE_CHARS = 500


def cause(exc: BaseException) -> str:
    """What a step raised, as its ledger row and its turn's `error` event name it: the
    exception's type and the first line of its message, at most CAUSE_CHARS.

    Careful: a driver's error carries its statement and parameters on the lines after the
    first; those stay in the worker's log, with the traceback, and are no tenant's to read.
    """
    message = str(exc).strip().partition("\n")[0]
    return f"{type(exc).__name__}: {message}"[:CAUSE_CHARS] if message else type(exc).__name__


def turn_fails(ctx: StepContext, conversation_id: str, step: Step, message: str
               ) -> list[FollowUp]:
    """A model or compact step was given up: its turn fails with an `error` event."""
    return ctx.record_error(conversation_id, step, "failed_permanent", "max_attempts", message)


class Faults:
    """The faults of a process's steps, counted in the ledger."""

    def __init__(self, ctx: StepContext) -> None:
        self.ctx = ctx

    def given_up(self, step_key: str, give_up: Callable[[str], list[FollowUp]]
                 ) -> list[FollowUp]:
        """Give the step up if its faults are used up (one caller does): `give_up` tells its
        turn why, naming the last error the step recorded."""
        max_attempts = self.ctx.config.max_attempts
        record = self.ctx.store.steps.give_up(step_key, max_attempts=max_attempts,
                                              now=self.ctx.clock())
        if record is None:
            return []
        log.warning("step given up after %d attempts", max_attempts,
                    extra={"status": "failed_permanent"})
        last = f"; the last error: {record.last_error}" if record.last_error else ""
        return give_up(f"the step failed {max_attempts} times (it raised, or its worker died"
                       f" while it ran alone); giving up{last}")

    def raised_unclaimed(self, conversation_id: str, step: Step | None, exc: Exception
                         ) -> list[FollowUp]:
        """A task raised before it claimed its step: while it loaded the view, decided, or
        made the step ready (listed a model step's tools). inv. 12: it counts as a fault of
        `step`, or, when none was decided yet, of the model step at the end of a running
        turn that no other step will move, which is held for a lease: the sweeper drives it
        again then, and the duplicates of this task that raise meanwhile count nothing more.
        Once the faults are used up the step is given up, and its turn fails with an
        `error` event. Logged once, with its traceback when it counted.

        Careful: a model or compact step of a running turn only. A tool task that cannot
        read its call counts nothing: the sweeper drives it again, since its call's row is
        what giving it up would close.
        """
        error, config = cause(exc), self.ctx.config
        info = self.ctx.store.conversations.load(conversation_id)
        blamed = self._blamed(info, step)
        if info is None or blamed is None:
            log.warning("task raised %s before it claimed a step; no running turn waits on it",
                        error)
            return []
        now = self.ctx.clock()
        new = NewStep.of(blamed, conversation_id, task_id(blamed.key), tenant=info.tenant)
        record = self.ctx.store.steps.fault(new, error=error, now=now,
                                            retry_at=now + timedelta(seconds=config.lease_s))
        if record is None:
            log.warning("task raised %s before it claimed its step; another attempt of the"
                        " step counts", error)
            return []
        log.error("task raised %s before it claimed its step (fault %d of %d)", error,
                  record.faults, config.max_attempts, exc_info=exc)
        if record.faults < config.max_attempts:
            return []
        return self.given_up(blamed.key, lambda message: turn_fails(
            self.ctx, conversation_id, blamed, message))

    def _blamed(self, info: ConversationInfo | None, step: Step | None) -> Step | None:
        """The step whose fault it is, if the conversation's turn runs (a failed turn is
        what giving the step up writes): `step`, or the stalled turn's."""
        if info is None or info.fsm.state != "running":
            return None
        return step or self._stalled(info)

    def _stalled(self, info: ConversationInfo) -> Step | None:
        """The model step at the end of the log, if none of the turn's steps is open
        (scheduled, waiting, held or running): only the conversation's next advance would
        move it, and that is the task that raised."""
        step = Step.model(info.id, info.next_seq - 1)
        open_steps = [s for s in self.ctx.store.steps.list_of(info.id)
                      if s.step_key != step.key and s.status in (*CLAIMABLE, "running")]
        return None if open_steps else step
