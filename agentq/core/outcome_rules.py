"""What a person's answer to an outcome_unknown call does: ran, did not run, or abandon.

A `once` call whose run was found started and unfinished (agentq.core.once) takes these
three answers and no other; no other call takes them. As every answer: the same one twice
changes nothing (inv. 5), a different one once answered is refused.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentq.core import once
from agentq.core.events import ToolCallRecord
from agentq.core.refusal import Refusal


@dataclass(frozen=True)
class RecordRan:
    """It ran: the model reads `result` as the call's result."""

    call: ToolCallRecord
    result: Any


@dataclass(frozen=True)
class RunAgain:
    """It did not run: the call runs now, once, as its next run."""

    call: ToolCallRecord


@dataclass(frozen=True)
class Abandon:
    """Nobody will find out: the model reads an error saying the outcome is unknown."""

    call: ToolCallRecord
    reason: str | None


@dataclass(frozen=True)
class Repeated:
    """The call already took this very answer."""

    call: ToolCallRecord


OutcomeVerdict = Refusal | Repeated | RecordRan | RunAgain | Abandon


def concerns(status: str, call: ToolCallRecord) -> bool:
    """Whether these rules, not the others, judge an answer of `status` to `call`."""
    return status in once.ANSWERS or once.was_unknown(call)


def classify_outcome_answer(
    call: ToolCallRecord, *, status: str, result: Any, reason: str | None,
) -> OutcomeVerdict:
    """What the answer does to the call, as a flat ladder of rules."""
    if not once.was_unknown(call):
        return _conflict(f"tool call {call.id} has no unknown outcome: {', '.join(once.ANSWERS)} "
                         "answer only a call whose run was found unfinished", call)
    if status not in once.ANSWERS:
        return _conflict(f"tool call {call.id}'s outcome is unknown: answer "
                         f"{', '.join(once.ANSWERS)}", call)
    shape = _shape(status, result, reason)
    if shape is not None:
        return shape
    if not once.waits(call):
        if _same_answer(call, status, result, reason):
            return Repeated(call)  # inv. 5: the same answer twice changes nothing
        return _conflict(f"tool call {call.id} is already answered", call)
    if status == once.RAN:
        return RecordRan(call, result)
    if status == once.DID_NOT_RUN:
        return RunAgain(call)
    return Abandon(call, reason)


def _shape(status: str, result: Any, reason: str | None) -> Refusal | None:
    """`ran` carries the result the model reads; the others none; a reason goes with abandon."""
    if status == once.RAN and result is None:
        return Refusal.invalid("`ran` carries the call's result: what the model reads")
    if status != once.RAN and result is not None:
        return Refusal.invalid(f"`{status}` carries no result")
    if reason is not None and status != once.ABANDONED:
        return Refusal.invalid("a reason goes with `abandoned`")
    return None


def _same_answer(call: ToolCallRecord, status: str, result: Any, reason: str | None) -> bool:
    mark = call.started or {}
    if mark.get("answered") != status:
        return False
    if status == once.RAN:
        return bool(call.result == result)
    if status == once.ABANDONED:
        return mark.get("reason") == reason
    return True


def _conflict(message: str, call: ToolCallRecord) -> Refusal:
    return Refusal.conflict(message, details={"status": call.status})
