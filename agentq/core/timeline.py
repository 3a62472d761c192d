"""A turn's timeline: what each step of the turn did and when, as bars on one time axis.

Pure: it folds what the store kept of a turn (its events, its steps with their claims, its
calls and their child conversations) into values a page, the API and `agentq inspect`
draw. Nothing here reads a clock: `now` closes the bars of what still runs.

An attempt is one claim of a step (`steps.attempt_log`): its worker, when it was claimed,
and how it ended, which the claim after it found (`after`) or, for the last, the step's
status. Events the timeline has no bar for (handoffs, guardrails, kinds added later) are
kept as marks on the axis, with their content, so nothing in the log is hidden.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agentq.core.decide import Step
from agentq.core.events import Event, ToolCallRecord
from agentq.core.prices import format_money
from agentq.core.timefmt import parse_ts

# how an attempt ended, from the status the next claim found the step in
_ENDED_BY_NEXT = {
    "failed_recoverable": "retried",  # it raised, and was tried again
    "running": "died",  # its lease ran out: the worker died under it
    "scheduled": "released",  # given back uncounted (a breaker's hold)
    "waiting": "released",  # given back to wait for a slot
}
# how the last attempt ended, from the step's status
_ENDED_AS = {
    "succeeded": "done", "failed_permanent": "given_up", "failed_recoverable": "retried",
    "cancelled": "cancelled", "timeout": "timeout", "scheduled": "released", "waiting": "released",
    "running": "running",
}
# events drawn as bars or rows of their own; any other kind is a mark
_DRAWN = frozenset({"assistant_msg", "tool_call", "tool_result", "suspension", "resolution"})


@dataclass(frozen=True)
class StepRow:
    """What the ledger holds of one step, as the timeline reads it."""

    step_key: str
    kind: str
    ref: Mapping[str, Any]
    status: str
    attempts: int
    retries: int
    faults: int
    deaths: int
    worker: str | None
    lease_until: datetime | None
    last_error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    round_id: str | None = None
    attempt_log: Sequence[Mapping[str, Any]] = ()


@dataclass(frozen=True)
class ChildRow:
    """A child conversation that answers one of the turn's sub-agent calls."""

    id: str
    parent_call_id: str
    state: str
    status: str
    agent: str | None


@dataclass(frozen=True)
class Attempt:
    number: int
    worker: str | None
    claimed_at: datetime | None
    ended_at: datetime | None  # known for the last attempt only; the next claim bounds the others
    outcome: str  # done, retried, died, released, given_up, cancelled, timeout, running
    error: str | None = None


@dataclass(frozen=True)
class Span:
    """A stretch of waiting on the axis: for a slot of the tenant's share, or for a person."""

    kind: str  # "slot" or "person"
    start: datetime
    end: datetime | None  # None: still waiting


@dataclass(frozen=True)
class StepBar:
    step_key: str
    kind: str
    label: str
    status: str
    scheduled_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    attempts: list[Attempt]
    waits: list[Span]
    retries: int  # the provider's retries within its attempts
    round_id: str | None = None
    tool_call_id: str | None = None
    after_seq: int | None = None  # a model step's: the event it answers


@dataclass(frozen=True)
class ModelCallMark:
    step_key: str | None
    round_id: str | None
    at: datetime
    usage: dict[str, Any]
    interrupted: bool
    time_to_first_token_ms: int | None = None
    cost: str | None = None  # the call's cost at the prices in force, decimal text


@dataclass(frozen=True)
class CallBar:
    tool_call_id: str
    name: str
    executor: str
    status: str
    created_at: datetime
    resolved_at: datetime | None
    needs_approval: bool
    waits: list[Span]
    child_conversation_id: str | None = None
    child_state: str | None = None
    child_agent: str | None = None


@dataclass(frozen=True)
class Mark:
    """An event of the turn with no bar of its own, kept as it is."""

    seq: int
    type: str
    at: datetime
    content: dict[str, Any]


@dataclass(frozen=True)
class Timeline:
    conversation_id: str
    turn_id: str
    started_at: datetime
    ended_at: datetime | None  # None while the turn runs
    steps: list[StepBar]
    calls: list[CallBar]
    model_calls: list[ModelCallMark]
    marks: list[Mark] = field(default_factory=list)


def step_keys_of(conversation_id: str, events: Sequence[Event],
                 calls: Iterable[ToolCallRecord]) -> list[str]:
    """Every step key the turn's steps may have: a model step after each of its events, and
    the steps of each of its calls (run, run again after each answer, expired, answered by a
    child). The store reads the steps by these keys in one statement."""
    keys = [Step.model(conversation_id, event.seq).key for event in events]
    for call in calls:
        keys += [Step.tool(conversation_id, call.id, answers).key
                 for answers in range(call.answers + 1)]
        keys += [Step.expire(conversation_id, call.id).key, Step.child(conversation_id, call.id).key]
    return keys


def timeline(conversation_id: str, turn_id: str, events: Sequence[Event],
             steps: Sequence[StepRow], calls: Sequence[ToolCallRecord],
             children: Sequence[ChildRow], *, now: datetime, running: bool) -> Timeline:
    """The turn's timeline from its events (in seq order), steps, calls and children."""
    names = {call.id: call.name for call in calls}
    placed = {str(e.content.get("tool_call_id")): e.seq for e in events if e.type == "tool_call"}
    bars = sorted((step_bar(step, names, now=now) for step in steps),
                  key=lambda bar: (bar.scheduled_at, _place(bar, placed), bar.step_key))
    by_call = {child.parent_call_id: child for child in children}
    start = min([e.created_at for e in events] + [b.scheduled_at for b in bars], default=now)
    return Timeline(
        conversation_id=conversation_id, turn_id=turn_id, started_at=start,
        ended_at=None if running or not events else events[-1].created_at,
        steps=bars, calls=[call_bar(call, by_call.get(call.id)) for call in calls],
        model_calls=[model_call(e) for e in events if e.type == "assistant_msg"],
        marks=[Mark(e.seq, e.type, e.created_at, e.content) for e in events
               if e.type not in _DRAWN],
    )


def _place(bar: StepBar, placed: Mapping[str, int]) -> float:
    """Where the step falls in the log, for steps scheduled at the same instant: a model step
    after the event it follows, a call's steps after the call."""
    if bar.tool_call_id is not None:
        return placed.get(bar.tool_call_id, 0) + 0.5
    return float(bar.after_seq or 0)


def step_bar(step: StepRow, names: Mapping[str, str], *, now: datetime) -> StepBar:
    """One step: its attempts, and its waits for a slot."""
    call_id = step.ref.get("tool_call_id")
    label = names.get(call_id, call_id) if call_id else f"model after #{step.ref.get('after_seq')}"
    attempts = attempts_of(step, now=now)
    return StepBar(
        step_key=step.step_key, kind=step.kind, label=f"{step.kind} {label}", status=step.status,
        scheduled_at=step.created_at, started_at=step.started_at, finished_at=step.finished_at,
        attempts=attempts, waits=slot_waits(step, attempts), retries=step.retries,
        round_id=step.round_id, tool_call_id=call_id, after_seq=step.ref.get("after_seq"),
    )


def attempts_of(step: StepRow, *, now: datetime) -> list[Attempt]:
    """Each claim of the step, with the outcome the next claim (or the step's status) tells."""
    log = list(step.attempt_log)
    attempts = []
    for number, entry in enumerate(log, start=1):
        later = log[number] if number < len(log) else None
        if later is not None:
            outcome, ended, error = _ENDED_BY_NEXT.get(str(later.get("after")), "retried"), None, \
                later.get("error")
        else:
            outcome, ended, error = _last_outcome(step, now), step.finished_at, step.last_error
        attempts.append(Attempt(number, entry.get("worker"), _claimed_at(entry.get("claimed_at")),
                                ended, outcome, error if outcome != "done" else None))
    return attempts


def _last_outcome(step: StepRow, now: datetime) -> str:
    if step.status == "running" and step.lease_until is not None and step.lease_until < now:
        return "died"
    return _ENDED_AS.get(step.status, step.status)


def slot_waits(step: StepRow, attempts: Sequence[Attempt]) -> list[Span]:
    """The step waited for a slot of its tenant's share: from when it arrived to its first
    claim, whenever that claim found it waiting (or till now, if it waits still)."""
    first = step.attempt_log[0] if step.attempt_log else None
    if step.status == "waiting" and not attempts:
        return [Span("slot", step.created_at, None)]
    if first is not None and first.get("after") == "waiting" and attempts[0].claimed_at:
        return [Span("slot", step.created_at, attempts[0].claimed_at)]
    return []


def call_bar(call: ToolCallRecord, child: ChildRow | None) -> CallBar:
    """A tool call: from the round that made it to its result; a person's part as a wait."""
    person = call.executor == "human" or call.needs_approval
    waits = [Span("person", call.created_at, call.resolved_at)] if person else []
    child_id = call.to_json().get("child_conversation_id")
    return CallBar(
        tool_call_id=call.id, name=call.name, executor=call.executor, status=call.status,
        created_at=call.created_at, resolved_at=call.resolved_at,
        needs_approval=call.needs_approval, waits=waits, child_conversation_id=child_id,
        child_state=child.state if child else None, child_agent=child.agent if child else None,
    )


def model_call(event: Event) -> ModelCallMark:
    """A committed model call, from the assistant message it wrote."""
    content = event.content
    usage = dict(content.get("usage") or {})
    ttft = content.get("time_to_first_token_ms", usage.pop("time_to_first_token_ms", None))
    return ModelCallMark(
        step_key=event.step_key, round_id=event.round_id, at=event.created_at, usage=usage,
        interrupted=bool(content.get("interrupted")), time_to_first_token_ms=ttft,
        cost=None if content.get("cost_nanos") is None else format_money(content["cost_nanos"]),
    )


def _claimed_at(value: Any) -> datetime | None:
    """A claim's time as the database wrote it into JSON (ISO text, `Z` or an offset)."""
    return parse_ts(value) if isinstance(value, str) else None
