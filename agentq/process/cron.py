"""A cron expression in an IANA time zone as a schedule's calendar (agentq.core.schedules).

Parsing and the walk through time are cronsim's, which fires as cron does across daylight
saving changes (a skipped local time fires at the first instant after it, a repeated one
once); zoneinfo knows the zones. Slots come out in UTC, as the store keeps every instant.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError


class BadCalendar(ValueError):
    """A cron expression or a time zone that cannot be used; the message says why and
    `code` which (`invalid_timezone`, `invalid_cron`)."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Cron:
    """The slots of `expression` read on the clocks of `timezone`."""

    expression: str
    timezone: str

    def slots_after(self, after: datetime) -> Iterator[datetime]:
        local = after.astimezone(zone(self.timezone))
        for slot in CronSim(self.expression, local):
            yield slot.astimezone(UTC)

    def slots_before(self, before: datetime) -> Iterator[datetime]:
        local = before.astimezone(zone(self.timezone))
        for slot in CronSim(self.expression, local, reverse=True):
            yield slot.astimezone(UTC)


def zone(name: str) -> ZoneInfo:
    """The IANA zone `name`, or BadCalendar."""
    if not name or name.startswith(("/", ".")) or ".." in name or "\x00" in name:
        raise BadCalendar(f"no time zone {name!r}: name an IANA zone such as 'Europe/Paris'",
                          "invalid_timezone")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise BadCalendar(f"no time zone {name!r}: name an IANA zone such as 'Europe/Paris'",
                          "invalid_timezone") from None


def cron(expression: str, timezone: str) -> Cron:
    """The calendar of `expression` in `timezone`, checked now, or BadCalendar."""
    zone(timezone)
    try:
        CronSim(expression, datetime(2000, 1, 1, tzinfo=UTC))
    except (CronSimError, ValueError) as exc:
        raise BadCalendar(f"not a cron expression: {expression!r} ({exc})", "invalid_cron") from None
    return Cron(expression, timezone)
