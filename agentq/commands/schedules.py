"""What a tenant can do to its schedules: create one, pause, resume, delete, and read its next
slots and its runs so far.

A schedule is tenant input (inv. 9): its cron expression and zone are parsed here
(agentq.process.cron), its pace and catch-up bound are held to the operator's limits
(`[schedules]` of the policy), its agent must be one the tenant may start and its
conversation one it owns. Anything wrong is an InvalidInput (422) and nothing is written.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentq.commands.conversations import Commands
from agentq.commands.refusals import refused
from agentq.core.message_rules import message_request
from agentq.core.refusal import Refusal
from agentq.core.schedules import Calendar, CatchUp, Interval, shortest_gap_s, upcoming
from agentq.core.scope import Scope
from agentq.errors import Conflict, InvalidInput, NotFound
from agentq.process.cron import BadCalendar, cron
from agentq.store.schedules import ScheduleRecord, ScheduleRun


@dataclass(frozen=True)
class NewSchedule:
    """A schedule as a tenant asks for it: `cron` (in `timezone`) or `every_s`; `agent` (a
    new conversation each slot) or `conversation_id` (a message into it); `expire_after_s`
    None: a call that waits for a person in a run waits as its tool says."""

    name: str
    message: Any
    cron: str | None = None
    timezone: str = "UTC"
    every_s: float | None = None
    agent: str | None = None
    conversation_id: str | None = None
    catch_up: CatchUp = CatchUp()
    expire_after_s: float | None = None
    paused: bool = False


def calendar_of(record: ScheduleRecord) -> Calendar:
    """When the stored schedule fires (it was checked when it was created)."""
    if record.cron is not None:
        return cron(record.cron, record.timezone or "UTC")
    assert record.every_s is not None
    return Interval(record.every_s, record.created_at)


def catch_up_of(record: ScheduleRecord) -> CatchUp:
    rule = record.catch_up
    return CatchUp(rule["mode"], int(rule.get("max_slots") or 0), rule.get("max_age_s"))


def unattended_of(record: ScheduleRecord) -> dict[str, Any] | None:
    """What a run's user_msg carries for its waiting calls (None: they wait as usual)."""
    if record.approvals.get("mode") != "expire":
        return None
    return {"expire_after_s": record.approvals["expire_after_s"], "schedule_id": record.id}


class ScheduleCommands:
    """A tenant's schedules, checked against the operator's policy before they are stored."""

    def __init__(self, commands: Commands, clock: Callable[[], datetime] | None = None) -> None:
        self.commands = commands
        self.store = commands.store
        self.clock = clock or commands.clock

    def create(self, scope: Scope, new: NewSchedule) -> ScheduleRecord:
        """Store a new schedule, or InvalidInput (422) / Conflict (409, too many)."""
        now = self.clock()
        calendar = self._calendar(scope, new, now)
        self._check_catch_up(scope, new.catch_up)
        self._check_action(scope, new)
        first = upcoming(calendar, now, 1)
        if not first:
            raise InvalidInput("the cron expression never fires", code="invalid_cron")
        record = ScheduleRecord(
            id=str(uuid.uuid4()), tenant=scope.tenant, name=new.name, cron=new.cron,
            timezone=new.timezone if new.cron is not None else None, every_s=new.every_s,
            action="start" if new.agent is not None else "post", agent=new.agent,
            conversation_id=new.conversation_id, message=new.message,
            catch_up={"mode": new.catch_up.mode, "max_slots": new.catch_up.max_slots,
                      "max_age_s": new.catch_up.max_age_s},
            approvals=({"mode": "wait", "expire_after_s": None} if new.expire_after_s is None
                       else {"mode": "expire", "expire_after_s": new.expire_after_s}),
            paused=new.paused, next_at=first[0], created_at=now, updated_at=now,
        )
        limit = self.commands.policy.schedules_for(scope.tenant).max_per_tenant
        if not self.store.schedules.add(record, max_per_tenant=limit):
            raise Conflict(f"a tenant may have at most {limit} schedules", code="too_many_schedules")
        return record

    def get(self, scope: Scope, schedule_id: str) -> ScheduleRecord:
        found = self.store.schedules.load(schedule_id, tenant=scope.tenant)
        if found is None:
            raise NotFound(f"no schedule {schedule_id}")
        return found

    def list_for(self, scope: Scope) -> list[ScheduleRecord]:
        return self.store.schedules.list_for(scope.tenant)

    def pause(self, scope: Scope, schedule_id: str) -> ScheduleRecord:
        self.get(scope, schedule_id)
        self.store.schedules.set_paused(schedule_id, tenant=scope.tenant, paused=True,
                                        now=self.clock())
        return self.get(scope, schedule_id)

    def resume(self, scope: Scope, schedule_id: str) -> ScheduleRecord:
        """Fire again from the next slot after now: the slots of the pause are not missed ones."""
        record = self.get(scope, schedule_id)
        if record.paused:
            now = self.clock()
            following = upcoming(calendar_of(record), now, 1)
            self.store.schedules.set_paused(schedule_id, tenant=scope.tenant, paused=False,
                                            now=now, next_at=following[0] if following else None)
        return self.get(scope, schedule_id)

    def delete(self, scope: Scope, schedule_id: str) -> None:
        if not self.store.schedules.delete(schedule_id, tenant=scope.tenant):
            raise NotFound(f"no schedule {schedule_id}")

    def next_slots(self, record: ScheduleRecord, count: int) -> list[datetime]:
        """The next `count` slots it will fire (none while paused)."""
        if record.paused:
            return []
        calendar = calendar_of(record)
        later = upcoming(calendar, record.next_at, count - 1) if count > 1 else []
        return [record.next_at, *later][:count]

    def runs(self, scope: Scope, schedule_id: str, *, limit: int) -> list[ScheduleRun]:
        self.get(scope, schedule_id)
        return self.store.schedules.list_runs(schedule_id, limit=limit)

    def _calendar(self, scope: Scope, new: NewSchedule, now: datetime) -> Calendar:
        """The calendar asked for, no faster than the tenant's shortest interval."""
        shortest = self.commands.policy.schedules_for(scope.tenant).min_interval_s
        if (new.cron is None) == (new.every_s is None):
            raise InvalidInput("give either cron (with timezone) or every_s", code="invalid_schedule")
        if new.every_s is not None:
            if new.every_s < shortest:
                raise _too_fast(new.every_s, shortest, "every_s")
            return Interval(new.every_s, now)
        try:
            calendar = cron(new.cron or "", new.timezone)
        except BadCalendar as exc:
            loc = "timezone" if exc.code == "invalid_timezone" else "cron"
            raise InvalidInput(str(exc), code=exc.code, details=[
                {"loc": ["body", loc], "msg": str(exc), "type": exc.code}]) from None
        gap = shortest_gap_s(calendar, now)
        if gap < shortest:
            raise _too_fast(gap, shortest, "cron")
        return calendar

    def _check_catch_up(self, scope: Scope, catch_up: CatchUp) -> None:
        limits = self.commands.policy.schedules_for(scope.tenant)
        if catch_up.mode == "all" and catch_up.max_slots > limits.max_catch_up_slots:
            raise _above("max_slots", catch_up.max_slots, limits.max_catch_up_slots)
        age = catch_up.max_age_s
        if catch_up.mode == "all" and age is not None and age > limits.max_catch_up_age_s:
            raise _above("max_age_s", age, limits.max_catch_up_age_s)

    def _check_action(self, scope: Scope, new: NewSchedule) -> None:
        """One action: an agent the tenant may start, or a conversation it owns; a message."""
        if (new.agent is None) == (new.conversation_id is None):
            raise InvalidInput("give either agent (start a conversation) or conversation_id "
                               "(post into it)", code="invalid_schedule")
        request = message_request(new.message, "enqueue")
        if isinstance(request, Refusal):
            raise refused(request)
        if new.agent is not None:
            self.commands.agent_version(scope, new.agent)  # InvalidInput if not the tenant's to use
            return
        found = self.store.conversations.load(new.conversation_id or "", tenant=scope.tenant)
        if found is None or found.status != "active":
            raise InvalidInput(f"no active conversation {new.conversation_id} of yours",
                               code="unknown_conversation", details=[{
                                   "loc": ["body", "conversation_id"], "type": "unknown_conversation",
                                   "msg": "no active conversation of yours"}])


def _too_fast(every_s: float, shortest: float, field: str) -> InvalidInput:
    message = (f"this schedule fires every {every_s:g} s at times; the shortest interval "
               f"allowed is {shortest:g} s")
    return InvalidInput(message, code="interval_too_short", details=[
        {"loc": ["body", field], "msg": message, "type": "interval_too_short"}])


def _above(field: str, value: float, limit: float) -> InvalidInput:
    message = f"catch_up.{field} {value:g} is above the limit of {limit:g}"
    return InvalidInput(message, code="above_ceiling", details=[
        {"loc": ["body", "catch_up", field], "msg": message, "type": "above_ceiling",
         "limit": limit}])
