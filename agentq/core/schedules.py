"""Schedules: which slots a tick fires, by the schedule's catch-up rule, and the ids a slot's
run writes under.

Pure: time is passed in (`now`) and slots come from a `Calendar` (an interval here, a cron
expression in agentq.process.cron), so every rule is tested with plain datetimes. A slot's
conversation id and message key derive from (schedule, slot) alone (inv. 10), so a slot
fired twice, by two tickers or a ticker that died half way, asks for the same run twice.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from agentq.core.keys import AGENTQ_NAMESPACE

CatchUpMode = Literal["skip", "latest", "all"]
# How many on-time slots one tick fires for one schedule at most, and how many slots the
# shortest gap of a cron expression is measured over.
SCAN_LIMIT = 1000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)
WEEK_AND_A_DAY = timedelta(days=8)


class Calendar(Protocol):
    """When a schedule fires."""

    def slots_after(self, after: datetime) -> Iterator[datetime]:
        """The slots strictly after `after`, in order, UTC-aware, without end."""

    def slots_before(self, before: datetime) -> Iterator[datetime]:
        """The slots strictly before `before`, the latest first."""


@dataclass(frozen=True)
class Interval:
    """Every `every_s` seconds, counted from `anchor` (the schedule's creation)."""

    every_s: float
    anchor: datetime

    def slots_after(self, after: datetime) -> Iterator[datetime]:
        step = timedelta(seconds=self.every_s)
        passed = (after - self.anchor) // step + 1 if after >= self.anchor else 0
        slot = self.anchor + passed * step  # timedelta // timedelta: exact, in microseconds
        while True:
            yield slot
            slot += step

    def slots_before(self, before: datetime) -> Iterator[datetime]:
        step = timedelta(seconds=self.every_s)
        if before <= self.anchor:
            return
        slot = self.anchor + ((before - self.anchor - MICROSECOND) // step) * step
        while slot >= self.anchor:
            yield slot
            slot -= step


@dataclass(frozen=True)
class CatchUp:
    """What a tick fires of the slots it finds missed (older than the grace).

    `skip`: none of them; `latest`: the newest only; `all`: each, but at most `max_slots`
    (the newest ones) and none older than `max_age_s`.
    """

    mode: CatchUpMode = "skip"
    max_slots: int = 1
    max_age_s: float | None = None


@dataclass(frozen=True)
class Due:
    """What one tick does to a schedule: fire `fire`, then wait for `next_at`."""

    fire: tuple[datetime, ...]
    next_at: datetime


def due(calendar: Calendar, next_at: datetime, now: datetime, catch_up: CatchUp,
        *, grace_s: float) -> Due | None:
    """The slots to fire at `now` of a schedule whose next unfired slot is `next_at`, or None
    when that slot is still to come.

    A slot at most `grace_s` old is on time and always fires; an older one was missed
    (nothing ran when it fell due) and follows `catch_up`. The walk goes back from `now`
    and stops as soon as the rule wants no older slot, so a long outage costs no more than
    the slots it fires; `next_at` moves to the first slot after `now`.
    """
    if next_at > now:
        return None
    on_time_from = now - timedelta(seconds=grace_s)
    wanted = {"skip": 0, "latest": 1, "all": catch_up.max_slots}[catch_up.mode]
    oldest = next_at
    if catch_up.mode == "all" and catch_up.max_age_s is not None:
        oldest = max(oldest, now - timedelta(seconds=catch_up.max_age_s))
    on_time: list[datetime] = []
    missed: list[datetime] = []
    for slot in calendar.slots_before(now + MICROSECOND):
        if slot < next_at or len(on_time) >= SCAN_LIMIT:
            break
        if slot >= on_time_from:
            on_time.append(slot)
        elif len(missed) < wanted and slot >= oldest:
            missed.append(slot)
        else:
            break
    if catch_up.mode == "latest" and on_time:  # an on-time slot stands for the missed ones
        missed = []
    following = next(iter(calendar.slots_after(now)))
    return Due(tuple(sorted(missed + on_time)), following)


def upcoming(calendar: Calendar, now: datetime, count: int) -> list[datetime]:
    """The next `count` slots after `now`."""
    found: list[datetime] = []
    for slot in calendar.slots_after(now):
        if len(found) >= count:
            break
        found.append(slot)
    return found


def shortest_gap_s(calendar: Calendar, start: datetime, sample: int = SCAN_LIMIT) -> float:
    """The shortest time between two slots: among the first `sample` after `start`, or those of
    the first eight days from the first slot on, whichever ends sooner (a cron expression
    fires the same minutes on every day it fires, so a week and a day show its shortest gap;
    a rare date, like 29 February, is not walked for centuries)."""
    slots: list[datetime] = []
    for slot in calendar.slots_after(start):
        if len(slots) >= sample or (len(slots) >= 2 and slot > slots[0] + WEEK_AND_A_DAY):
            break
        slots.append(slot)
    gaps = [(b - a).total_seconds() for a, b in zip(slots, slots[1:], strict=False)]
    return min(gaps, default=float("inf"))


def slot_name(schedule_id: str, slot: datetime) -> str:
    """The stable name of a slot: the schedule and the slot's instant in UTC microseconds."""
    return f"schedule:{schedule_id}:{(slot - EPOCH) // timedelta(microseconds=1)}"


def slot_conversation_id(schedule_id: str, slot: datetime) -> str:
    """The conversation a `start` run of this slot creates (inv. 10)."""
    return str(uuid.uuid5(AGENTQ_NAMESPACE, slot_name(schedule_id, slot)))


def slot_message_key(schedule_id: str, slot: datetime) -> str:
    """The Idempotency-Key of the message this slot's run posts (inv. 5, 10)."""
    return slot_name(schedule_id, slot)


@dataclass(frozen=True)
class Retry:
    """A run that failed and is tried again, not before `at`."""

    at: datetime


@dataclass(frozen=True)
class GiveUp:
    """A run that failed its last attempt: it is `given_up`, with `reason`."""

    reason: str


def after_failure(attempts: int, error: str, now: datetime, *, max_attempts: int,
                  retry_after_s: float) -> Retry | GiveUp:
    """What becomes of a run whose `attempts`-th try failed with `error` (a failure that
    may pass: the database, a bug; a refusal fails the run at once). It is tried again after
    `retry_after_s`, doubled each time, so a short outage uses few attempts; after
    `max_attempts` it is given up, so a slot that can never fire stops being due and
    firing moves on."""
    if attempts >= max_attempts:
        return GiveUp(f"given up after {attempts} attempts; the last failed with: {error}")
    return Retry(now + timedelta(seconds=retry_after_s * 2 ** (attempts - 1)))


def unattended_expiry_s(rule: Mapping[str, Any] | None) -> float | None:
    """How long a wait for a person may last in a turn a schedule's run started under
    `expire` (the turn's `FsmState.unattended`); None: as long as the wait's own kind says."""
    value = (rule or {}).get("expire_after_s")
    return float(value) if isinstance(value, int | float) else None


def unattended_deadline(rule: Mapping[str, Any] | None, now: datetime,
                        expires_at: datetime | None) -> datetime | None:
    """The deadline of a wait for a person that starts at `now` with its own `expires_at`
    (None: none): the sooner of it and the unattended rule's, so nothing in a run nobody
    attends waits for ever, and a shorter deadline of its own still holds."""
    expiry_s = unattended_expiry_s(rule)
    if expiry_s is None:
        return expires_at
    capped = now + timedelta(seconds=expiry_s)
    return capped if expires_at is None else min(expires_at, capped)


def unattended_note(rule: Mapping[str, Any] | None) -> str:
    """What the model reads after an expired wait's own text, in a run nobody attends: why
    no one answered, so it finishes the run with what it has rather than ask again."""
    expiry_s = unattended_expiry_s(rule)
    if expiry_s is None:
        return ""
    return (f" Nobody attends this run: a schedule started it, and its rule ends every wait "
            f"for a person after {expiry_s:g} s. Finish without it.")
