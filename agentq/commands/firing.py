"""Firing schedules: what a tick does, wherever it runs (beat's `agentq.schedules.tick`, any
number of them at once).

A tick first records the slots that fell due (`Schedules.fire_slots`: the schedule's
`next_at` moves from the value read, and one run row per slot is keyed by (schedule,
slot)), then carries out every run still `due`: a `start` run creates the conversation
whose id derives from the slot and posts the message under a key derived from it too; a
`post` run posts that message into the schedule's conversation. Each of those writes is
idempotent, so a run carried out twice (two tickers, or one that died before it marked the
run `fired`) starts one conversation and posts one message (docs/design.md §17).

A run refused for a reason that will not pass (the agent is gone, the conversation ended,
the message is no longer allowed) is `failed` at once, with the refusal. Any other failure
(the database, a bug) is counted with the run and tried again later, each time twice as
late, and after the tenant's `run_attempts` the run is `given_up` with the last error: a
slot that can never fire stops being due, and one run's failure never stops a tick from
carrying out the others (agentq.core.schedules.after_failure). Likewise a schedule whose
due slots cannot be recorded is logged and tried again next tick, the others going on.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from agentq.commands.conversations import Commands
from agentq.commands.schedules import calendar_of, catch_up_of, unattended_of
from agentq.core.schedules import GiveUp, after_failure, due, slot_conversation_id, slot_message_key
from agentq.core.scope import Scope
from agentq.errors import Conflict, Forbidden, InvalidInput, NotFound
from agentq.followups import FollowUp
from agentq.store.schedules import ScheduleRecord, ScheduleRun

log = logging.getLogger(__name__)

# How many schedules, and how many runs, one tick takes up at most; the rest wait a tick.
TICK_BATCH = 200
# The refusals that fail a run at once: trying again would be refused the same way.
REFUSALS = (InvalidInput, NotFound, Conflict, Forbidden)
ERROR_CHARS = 500  # of an error kept with a run


class Firing:
    """Fires the slots that fell due and carries out their runs."""

    def __init__(self, commands: Commands, *, grace_s: float,
                 clock: Callable[[], datetime] | None = None) -> None:
        self.commands = commands
        self.store = commands.store
        self.grace_s = grace_s
        self.clock = clock or commands.clock

    def tick(self) -> list[FollowUp]:
        """Record what fell due, then carry out every run not yet carried out."""
        now = self.clock()
        for record in self.store.schedules.list_due(now=now, limit=TICK_BATCH):
            try:
                self.record_slots(record, now)
            except Exception:  # noqa: BLE001 - one schedule (a calendar that no longer
                # reads, a zone the new tzdata lacks) must not keep the others from firing
                log.exception("schedule %s: its due slots could not be recorded", record.id)
        followups: list[FollowUp] = []
        for run in self.store.schedules.list_unfired(now=now, limit=TICK_BATCH):
            followups.extend(self.carry_out(run))
        return followups

    def record_slots(self, record: ScheduleRecord, now: datetime) -> bool:
        """Write the runs of the slots due at `now` by the schedule's catch-up rule; False
        when another tick got there first (then it wrote them)."""
        found = due(calendar_of(record), record.next_at, now, catch_up_of(record),
                    grace_s=self.grace_s)
        if found is None:
            return False
        runs = [ScheduleRun(
            schedule_id=record.id, slot_at=slot, tenant=record.tenant,
            conversation_id=(slot_conversation_id(record.id, slot) if record.action == "start"
                             else record.conversation_id or ""),
            message_id=None, status="due", error=None, created_at=now, fired_at=None,
        ) for slot in found.fire]
        return self.store.schedules.fire_slots(record.id, from_next_at=record.next_at,
                                               to_next_at=found.next_at, runs=runs, now=now)

    def carry_out(self, run: ScheduleRun) -> list[FollowUp]:
        """Start the run's conversation or post its message, under ids derived from the slot."""
        record = self.store.schedules.load(run.schedule_id)
        if record is None:  # deleted meanwhile, with its runs
            return []
        scope = Scope(tenant=record.tenant)
        try:
            if record.action == "start":
                self.commands.create_conversation(scope, {}, agent=record.agent,
                                                  conversation_id=run.conversation_id)
            answer, followups = self.commands.post_message(
                run.conversation_id, record.message, scope,
                idempotency_key=slot_message_key(record.id, run.slot_at),
                unattended=unattended_of(record),
            )
        except REFUSALS as exc:  # the agent went away, the conversation ended, …
            log.warning("schedule %s: the run of %s failed: %s", record.id, run.slot_at, exc)
            self.store.schedules.finish_run(record.id, run.slot_at, status="failed",
                                            now=self.clock(), error=str(exc)[:ERROR_CHARS])
            return []
        except Exception as exc:  # may pass (the database), or never (a bug): tried again
            log.exception("schedule %s: attempt %d of the run of %s failed", record.id,
                          run.attempts + 1, run.slot_at)
            self.failed_attempt(run, f"{type(exc).__name__}: {exc}"[:ERROR_CHARS])
            return []
        self.store.schedules.finish_run(record.id, run.slot_at, status="fired", now=self.clock(),
                                        message_id=answer.message_id)
        return followups

    def failed_attempt(self, run: ScheduleRun, error: str) -> None:
        """Count the failed attempt: the run is tried again later, or given up after the
        tenant's `run_attempts`."""
        limits = self.commands.policy.schedules_for(run.tenant)
        now = self.clock()
        verdict = after_failure(run.attempts + 1, error, now, max_attempts=limits.run_attempts,
                                retry_after_s=limits.retry_after_s)
        if isinstance(verdict, GiveUp):
            log.warning("schedule %s: the run of %s is given up: %s", run.schedule_id,
                        run.slot_at, verdict.reason)
            self.store.schedules.finish_run(run.schedule_id, run.slot_at, status="given_up",
                                            now=now, error=verdict.reason[:ERROR_CHARS])
        else:
            self.store.schedules.retry_run(run.schedule_id, run.slot_at, error=error,
                                           retry_at=verdict.at)
