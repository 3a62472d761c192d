"""What a `once` tool's `reconcile(args, ctx)` answers when a run of its call was found
started and unfinished: it ran (with its result), it did not run, or it cannot tell.

A tool that can ask the outside world (did the payment with this key go through?) spares a
person the question: only `CannotTell`, or a reconcile that raises, goes to one
(agentq.core.once).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Ran:
    """The run took effect; `result` is what the model reads as the call's result."""

    result: Any


@dataclass(frozen=True)
class DidNotRun:
    """The run took no effect: the call runs now, once."""


@dataclass(frozen=True)
class CannotTell:
    """Nothing outside says; a person decides. `reason` is shown to them."""

    reason: str | None = None


Reconciled = Ran | DidNotRun | CannotTell


def reconciled(value: Any) -> Reconciled:
    """What a reconcile returned, or CannotTell saying it returned something else."""
    if isinstance(value, Ran | DidNotRun | CannotTell):
        return value
    return CannotTell(f"reconcile returned {type(value).__name__}, not Ran, DidNotRun or "
                      "CannotTell")
