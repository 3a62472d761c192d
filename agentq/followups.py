"""What a step or a command asks to happen next; `worker.enqueue` turns them into tasks.

Returning follow-ups instead of sending them keeps the runtime free of Celery, so the
whole runtime runs in tests on SQLite with no broker at all.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class Advance:
    """Load the view, decide, run the next step (at `eta`, if given: a held step's turn)."""

    conversation_id: str
    eta: datetime | None = None


@dataclass(frozen=True)
class RunTool:
    """Run one server tool call."""

    conversation_id: str
    tool_call_id: str
    step_key: str
    tool: str | None = field(default=None, compare=False)  # the tool's name, for Flower only


@dataclass(frozen=True)
class Expire:
    """Expire one pending call at `eta` (None: now)."""

    conversation_id: str
    tool_call_id: str
    step_key: str
    eta: datetime | None
    tool: str | None = field(default=None, compare=False)  # the tool's name, for Flower only


@dataclass(frozen=True)
class Compact:
    """Write the summary of the log through `to_seq` (docs/design.md §8)."""

    conversation_id: str
    to_seq: int
    step_key: str


@dataclass(frozen=True)
class Settled:
    """A pending call no longer waits (`outcome`: resolved, errored, approved, rejected,
    answered, cancelled). For Flower only: its expire task stops showing WAITING."""

    conversation_id: str
    tool_call_id: str
    outcome: str


FollowUp = Advance | RunTool | Expire | Compact | Settled
