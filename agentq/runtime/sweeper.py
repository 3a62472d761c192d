"""The sweeper that wakes when something falls due: a lease runs out, a held step may run
again, a pending call reaches its deadline.

Beat's `agentq.sweep` repairs everything every AGENTQ_SWEEP_S; this loop re-drives what
falls due in between, the moment it does, without the broker (which may have lost the
very tasks it stands in for). A wake costs one statement (the next deadlines, three index
lookups); a sweep runs only when something fell due, and re-drives only what fell due
since the last one. It runs in every worker that takes the timers queue, and the
sweeper lock lets one of them lead at a time (`agentq.store.sweeper_lock`).

It sleeps at most `max_sleep_s` (half a lease): a lease claimed while it sleeps runs out
no sooner than a lease from now, so it wakes in time for every lapsing lease; only a
deadline set closer than that to its creation can be up to `max_sleep_s` late.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from agentq.config import Config
from agentq.followups import FollowUp
from agentq.runtime.context import StepContext
from agentq.runtime.repair import sweep, sweep_due
from agentq.store import SweeperLock

log = logging.getLogger(__name__)

# A pending call's or a held step's own ETA task goes first; the sweeper follows this late.
ETA_GRACE_S = 1.0
# Wake this long after a deadline, so the clock has certainly passed it.
OVERSHOOT_S = 0.01
# Sweep a window again this soon when it held more lapsed steps than one page.
NEXT_PAGE_S = 0.5


def max_sleep_s(config: Config) -> float:
    """The longest a sweeper sleeps: half a lease, and never past a beat's sweep period."""
    return min(config.lease_s / 2.0, config.sweep_s)


class Sweeper:
    """One candidate sweeper of a process: `start` it beside the worker, `stop` it at exit."""

    def __init__(self, ctx: StepContext, send: Callable[[list[FollowUp]], None]) -> None:
        self.ctx = ctx
        self.send = send
        self.max_sleep_s = max_sleep_s(ctx.config)
        # The server ends a leader's session that sat idle this long (paused, partitioned).
        self.lock_idle_s = 3 * self.max_sleep_s + 1.0
        self._through: datetime | None = None  # all due up to here was re-driven; None: not leading
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="agentq-sweeper", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop, and give the lock up at once so another candidate leads."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def run(self) -> None:
        """Lead when the lock is free and sweep what falls due, until stopped."""
        lock: SweeperLock | None = None
        try:
            while not self._stopping.is_set():
                try:
                    lock = lock or self.ctx.store.sweeps.lock(idle_s=self.lock_idle_s)
                    wait_s = self.wake(lock)
                except Exception:  # the database went away, or our session did: start afresh
                    log.warning("sweeper: wake failed; retrying", exc_info=True)
                    if lock is not None:
                        lock.close()
                    lock, self._through, wait_s = None, None, self.max_sleep_s
                self._stopping.wait(wait_s)
        finally:
            if lock is not None:
                lock.close()

    def wake(self, lock: SweeperLock) -> float:
        """Lead if we may, re-drive what fell due; the seconds until the next wake."""
        if not lock.acquire():
            self._through = None
            return self.max_sleep_s
        now = self.ctx.clock()
        if self._through is None:  # just took the lead: repair all that waited for one
            self.send(sweep(self.ctx))
            self._through = now
            return 0.0
        grace = timedelta(seconds=ETA_GRACE_S)
        due = lock.next_deadlines(lease_after=self._through, hold_after=self._through - grace,
                                  call_after=self._through - grace)
        soonest = min((d for d in (due.lease, due.hold and due.hold + grace,
                                   due.call and due.call + grace) if d is not None),
                      default=None)
        if soonest is None:
            return self.max_sleep_s
        if soonest > now:
            return min(self.max_sleep_s, (soonest - now).total_seconds() + OVERSHOOT_S)
        due_now, complete = sweep_due(self.ctx, after=self._through, now=now, grace_s=ETA_GRACE_S)
        self.send(due_now)
        if not complete:  # the page re-driven is claimed anew meanwhile; then the next page
            return NEXT_PAGE_S
        self._through = now
        return 0.0
