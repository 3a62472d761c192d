"""Time in tests: T0, the instant they start from, and a clock they move by hand."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

T0 = datetime(2026, 11, 21, 22, 14, 3, 123456, tzinfo=timezone.utc)


class Clock:
    """A clock the test moves by hand, from `start` (T0 unless told)."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
