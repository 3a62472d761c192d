"""What happened, as a webhook receiver hears of it: the occurrences a batch of appended events makes.

Pure: a batch of events and the state after it give the occurrences, each named by the
seq of the event that caused it, so the outbox row written with that batch has a key
derived from the log (inv. 10) and a replayed batch names the same ones.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentq.core.events import FATAL_ERROR_STATUSES, Event, FsmState

EVENT_TYPES: tuple[str, ...] = (
    "call.waiting", "call.resolved", "call.expired", "turn.completed", "turn.failed",
    "budget.exceeded",
)
BUDGET_EXCEEDED = "budget_exceeded"  # the error code of a turn stopped by a token budget


@dataclass(frozen=True)
class Occurrence:
    """One thing a tenant may be told of: its type, the seq of its event, what it is about."""

    type: str
    seq: int
    ref: dict[str, Any]

    @property
    def key(self) -> str:
        """Unique within a conversation: an occurrence per event, per call of that event."""
        return f"{self.seq}:{self.type}:{self.ref.get('tool_call_id', '')}"


def occurrences(events: Sequence[Event], after: FsmState) -> list[Occurrence]:
    """The occurrences of `events`, appended together, in log order; `after` is the state
    they leave the conversation in."""
    found: list[Occurrence] = []
    for event in events:
        found.extend(_of(event))
    answer = _turn_answer(events, after)
    if answer is not None:
        found.append(Occurrence("turn.completed", answer.seq, {}))
    return sorted(found, key=lambda o: o.seq)


def _of(event: Event) -> list[Occurrence]:
    content = event.content
    if event.type == "suspension":
        return [Occurrence("call.waiting", event.seq, {"tool_call_id": call_id})
                for call_id in content.get("pending", [])]
    if event.type == "resolution":
        kind = "call.expired" if content.get("status") == "expired" else "call.resolved"
        return [Occurrence(kind, event.seq, {"tool_call_id": content["tool_call_id"]})]
    if event.type == "error" and content.get("status") in FATAL_ERROR_STATUSES:
        failed = [Occurrence("turn.failed", event.seq, {})]
        if content.get("code") == BUDGET_EXCEEDED:  # a waiting turn's is written by its hold
            failed.append(Occurrence("budget.exceeded", event.seq, content.get("details") or {}))
        return failed
    return []


def _turn_answer(events: Sequence[Event], after: FsmState) -> Event | None:
    """The model's answer that ended the turn in this batch, if it did (not an interrupt)."""
    if after.state != "idle":
        return None
    answers = [e for e in events if e.type == "assistant_msg"]
    if not answers or answers[-1].content.get("interrupted"):
        return None
    last = answers[-1]
    calls = any(e.type == "tool_call" and e.round_id == last.round_id for e in events)
    return None if calls else last

# How long a rotated-out signing secret may keep signing beside the new one, at most.
MAX_GRACE_S = 7 * 86_400.0
