"""Schedules: which slots a tick fires, by the schedule's catch-up rule, and the ids a slot's
run writes under.

Pure: time is passed in (`now`) and slots come from a `Calendar` (an interval here, a cron
expression in agentq.process.cron), so every rule is tested with plain datetimes. A slot's
conversation id and message key derive from (schedule, slot) alone (inv. 10), so a slot
fired twice, by two tickers or a ticker that died half way, asks for the same run twice.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal, Protocol

from agentq.core.events import View
from agentq.core.keys import AGENTQ_NAMESPACE

CatchUpMode = Literal["skip", "latest", "all"]
# How many slots one tick looks at for one schedule, at most: a ticker down for a long
# time walks a fast schedule's missed slots a page per tick, never all at once.
SCAN_LIMIT = 1000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Calendar(Protocol):
    """When a schedule fires."""

    def slots_after(self, after: datetime) -> Iterator[datetime]:
        """The slots strictly after `after`, in order, UTC-aware, without end."""


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
    (nothing ran when it fell due) and follows `catch_up`. `next_at` moves to the first
    slot after `now`, or, past SCAN_LIMIT slots, after the last one looked at.
    """
    if next_at > now:
        return None
    looked, following = [next_at], next_at
    for following in calendar.slots_after(next_at):
        if following > now or len(looked) >= SCAN_LIMIT:
            break
        looked.append(following)
    on_time_from = now - timedelta(seconds=grace_s)
    on_time = [s for s in looked if s >= on_time_from]
    missed = [s for s in looked if s < on_time_from]
    fire = caught_up(missed, now, catch_up, on_time=bool(on_time)) + on_time
    return Due(tuple(fire), following)


def caught_up(missed: list[datetime], now: datetime, catch_up: CatchUp,
              *, on_time: bool) -> list[datetime]:
    """The missed slots the rule fires; `latest` fires none when an on-time slot does."""
    if not missed or catch_up.mode == "skip":
        return []
    if catch_up.mode == "latest":
        return [] if on_time else [missed[-1]]
    kept = missed[-catch_up.max_slots:] if catch_up.max_slots > 0 else []
    if catch_up.max_age_s is not None:
        oldest = now - timedelta(seconds=catch_up.max_age_s)
        kept = [s for s in kept if s >= oldest]
    return kept


def upcoming(calendar: Calendar, now: datetime, count: int) -> list[datetime]:
    """The next `count` slots after `now`."""
    found = []
    for slot in calendar.slots_after(now):
        if len(found) >= count:
            break
        found.append(slot)
    return found


def shortest_gap_s(calendar: Calendar, start: datetime, sample: int = SCAN_LIMIT) -> float:
    """The shortest time between two slots among the first `sample` after `start`."""
    slots = upcoming(calendar, start, sample)
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


def unattended_expiry_s(view: View) -> float | None:
    """How long a call of the current turn that waits for a person may wait, when a
    schedule's run started the turn under `expire` (its user_msg says so); None: as its tool says."""
    for event in reversed(view.events):
        if event.seq < view.fsm.turn_seq:
            break
        if event.seq == view.fsm.turn_seq and event.type == "user_msg":
            value = (event.content.get("unattended") or {}).get("expire_after_s")
            return float(value) if isinstance(value, int | float) else None
    return None
