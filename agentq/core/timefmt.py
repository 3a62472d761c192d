"""Exact, UTC-only timestamp text: the one format agentq writes and reads.

Careful: invariant 7 says a message's `created_at` survives store/load unchanged, so
every timestamp is normalised to UTC once, at the boundary, and always printed with
all six microsecond digits.
"""
from __future__ import annotations

from datetime import UTC, datetime


def to_utc(value: datetime) -> datetime:
    """A timezone-aware datetime in UTC; naive values are refused, not guessed."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("timestamp must carry a timezone")
    return value.astimezone(UTC)


def format_ts(value: datetime) -> str:
    """`2026-11-21T22:14:03.123456Z`: fixed width, so text order is time order."""
    return to_utc(value).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_ts(text: str) -> datetime:
    """Parse ISO 8601 with an offset (or `Z`) into a UTC datetime."""
    if not isinstance(text, str):
        raise ValueError("timestamp must be a string")
    return to_utc(datetime.fromisoformat(text.replace("Z", "+00:00")))
