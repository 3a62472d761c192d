"""A `once` call's start mark, and what a takeover reads in it (docs/design.md §9, inv. 13).

A tool declared `effect="once"` must not run twice blindly. Before its body runs, its
call's row takes a start mark, committed: `{"run": n, "worker": w, "started_at": t}`. A
step of the call that finds the mark of its own run already written did not start that
run: an earlier attempt did, and whether its effect happened is unknown. The call then
waits for a person as `outcome_unknown` (its mark gains `found_at`, `ran_s` and the
tool's description), unless the tool's `reconcile` can tell.

A person answers `ran` (with the result the model reads), `did_not_run` (the call runs
again, once: run n + 1, a step of its own) or `abandoned` (the model reads an error). The
log says which run a call is at: its `did_not_run` resolutions, counted.
"""
from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from agentq.core.timefmt import format_ts, parse_ts

if TYPE_CHECKING:
    from agentq.core.events import Event, ToolCallRecord

Effect = Literal["idempotent", "once"]
EFFECTS: tuple[str, ...] = ("idempotent", "once")
OUTCOME_UNKNOWN = "outcome_unknown"  # the kind of a pending call whose run may have happened
RAN, DID_NOT_RUN, ABANDONED = "ran", "did_not_run", "abandoned"
ANSWERS: tuple[str, ...] = (RAN, DID_NOT_RUN, ABANDONED)


def run_of(mark: dict[str, Any] | None) -> int:
    """The run a call is at: 0 until a person said an earlier one did not run."""
    return int((mark or {}).get("run", 0))


def started_before(mark: dict[str, Any] | None, run: int) -> bool:
    """Whether `run` was already started by an attempt (this step's claim is a takeover)."""
    return mark is not None and run_of(mark) == run and "started_at" in mark


def start_mark(run: int, *, worker: str, now: datetime) -> dict[str, Any]:
    """The mark a run writes, and commits, before the tool body runs."""
    return {"run": run, "worker": worker, "started_at": format_ts(now)}


def found_mark(mark: dict[str, Any], *, now: datetime, description: str | None,
               reason: str | None = None) -> dict[str, Any]:
    """The mark of a run found started and unfinished: what a person decides on."""
    ran_s = max(0.0, (now - parse_ts(mark["started_at"])).total_seconds())
    found = {**mark, "found_at": format_ts(now), "ran_s": round(ran_s, 3),
             "description": description}
    if reason:
        found["reconcile"] = reason  # why the tool's reconcile could not tell
    return found


def answered_mark(mark: dict[str, Any], answer: str, reason: str | None = None
                  ) -> dict[str, Any]:
    """The mark once a person answered; `did_not_run` starts the next run, not yet started."""
    if answer == DID_NOT_RUN:
        return {"run": run_of(mark) + 1, "answered": DID_NOT_RUN}
    answered = {**mark, "answered": answer}
    if reason is not None:
        answered["reason"] = reason
    return answered


def was_unknown(call: ToolCallRecord) -> bool:
    """Whether the call's current run was found with its outcome unknown (answered or not)."""
    mark = call.started or {}
    return "found_at" in mark or "answered" in mark


def waits(call: ToolCallRecord) -> bool:
    """Whether the call waits for a person to say what became of its run."""
    mark = call.started or {}
    return call.status == "pending" and "found_at" in mark and "answered" not in mark


def abandoned_text(mark: dict[str, Any], reason: str | None) -> str:
    """What the model reads for an abandoned call."""
    why = f": {reason}" if reason else ""
    return (f"the outcome of this call is unknown: it started at {mark.get('started_at')} and "
            f"its worker stopped before it finished. A person abandoned it{why}. Whether it "
            "took effect is not known; do not assume either way.")


def suspension_content(call: ToolCallRecord, mark: dict[str, Any]) -> dict[str, Any]:
    """What the `suspension` of an outcome_unknown call carries: all a person needs."""
    return {"pending": [call.id], OUTCOME_UNKNOWN: {
        "tool_call_id": call.id, "name": call.name, "args": call.args, "run": run_of(mark),
        **{k: mark.get(k) for k in ("worker", "started_at", "found_at", "ran_s", "description")},
        **{k: mark[k] for k in ("reconcile", "given_up") if k in mark},
    }}


def found_in(event: Event) -> dict[str, Any] | None:
    """The outcome_unknown a suspension event carries, if it is one."""
    if event.type != "suspension":
        return None
    found = event.content.get(OUTCOME_UNKNOWN)
    return found if isinstance(found, dict) else None


def runs(turn: Sequence[Event], call_id: str) -> int:
    """The run the call is at, from the log: the `did_not_run` answers it took."""
    return sum(1 for e in turn if e.type == "resolution" and e.content.get("status") == DID_NOT_RUN
               and e.content.get("tool_call_id") == call_id)


def waits_in(turn: Sequence[Event], call_id: str) -> bool:
    """Whether the log leaves the call waiting for a person to say what became of its run."""
    found = sum(1 for e in turn if (f := found_in(e)) is not None
                and f.get("tool_call_id") == call_id)
    return found > runs(turn, call_id)
