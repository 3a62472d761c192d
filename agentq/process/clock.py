"""The wall clock, read at the edges only (commands, the runtime, the CLI) and passed down.

The core and the store take time as a value (`now`), so every decision and every
transition is tested with plain datetimes.
"""
from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)
