"""A circuit breaker per provider endpoint, as pure transitions between closed, open, half-open.

When calls to one endpoint keep failing with transient errors, whichever conversations
make them, the breaker opens: model steps for that endpoint wait instead of calling it.
When the open time is over, one call is let through as a probe (half-open): its success
closes the breaker, its failure opens it again for twice as long (up to `max_open_s`).
The state is a plain value shared by every worker (`agentq.providers.breakers` keeps it); these
functions say what it becomes, with `now` passed in.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

State = Literal["closed", "open", "half_open"]
STATE_NUMBERS: dict[str, int] = {"closed": 0, "half_open": 1, "open": 2}  # for a gauge


@dataclass(frozen=True)
class BreakerPolicy:
    """When a breaker opens, for how long, and how long a probe may take before another goes."""

    failures_to_open: int = 5
    open_s: float = 30.0
    max_open_s: float = 600.0
    probe_s: float = 120.0


@dataclass(frozen=True)
class Breaker:
    """One endpoint's breaker. `until`: when a probe may go (open), or when the probe's turn
    lapses (half_open). `version` counts writes, for compare-and-set."""

    endpoint: str
    state: State = "closed"
    failures: int = 0  # transient failures in a row
    trips: int = 0  # openings since it last closed: each doubles the open time
    until: datetime | None = None
    last_error: str | None = None
    version: int = 0


@dataclass(frozen=True)
class Go:
    """Call the endpoint; `probe` says this call decides whether the breaker closes."""

    probe: bool = False


@dataclass(frozen=True)
class Wait:
    """Do not call before `until`; `reason` says why, for the retry notice and the log."""

    until: datetime
    reason: str


def before_call(breaker: Breaker, now: datetime, policy: BreakerPolicy) -> tuple[Go | Wait, Breaker | None]:
    """May a call go now? With the breaker it leaves behind, or None if unchanged."""
    if breaker.state == "closed":
        return Go(), None
    if breaker.until is not None and now < breaker.until:
        if breaker.state == "open":
            return Wait(breaker.until, _why(breaker)), None
        # a probe is out: look again after one open time, or when its turn lapses
        recheck = min(breaker.until, now + timedelta(seconds=policy.open_s))
        return Wait(recheck, f"a probe call to {breaker.endpoint} is under way; " + _why(breaker)), None
    probing = replace(breaker, state="half_open", until=now + timedelta(seconds=policy.probe_s))
    return Go(probe=True), probing


def after_failure(breaker: Breaker, now: datetime, error: str,
                  policy: BreakerPolicy) -> Breaker | None:
    """The breaker after a call failed with a transient error; None if unchanged."""
    if breaker.state == "open":
        return None  # calls that started before it opened: no news
    failures = breaker.failures + 1
    if breaker.state == "closed" and failures < policy.failures_to_open:
        return replace(breaker, failures=failures, last_error=error)
    trips = breaker.trips + 1
    open_s = min(policy.open_s * 2 ** (trips - 1), policy.max_open_s)
    return replace(breaker, state="open", failures=failures, trips=trips,
                   until=now + timedelta(seconds=open_s), last_error=error)


def after_success(breaker: Breaker) -> Breaker | None:
    """The breaker after a call got an answer: closed, with no failures; None if it was."""
    if breaker.state == "closed" and breaker.failures == 0:
        return None
    return replace(breaker, state="closed", failures=0, trips=0, until=None)


def _why(breaker: Breaker) -> str:
    return (f"the circuit breaker for {breaker.endpoint} is open after {breaker.failures} "
            f"failed calls in a row (last: {breaker.last_error})")
