"""The leases of a worker's running steps, kept alive together while their work goes on.

A process may carry a thousand model calls at once, so the leases are kept in batches: one
UPDATE per renewal period renews every lease this process holds, and between renewals one
SELECT per check period finds the steps that are no longer ours (an interrupt cancelled
them, or the lease ran out and another worker took them), instead of one write per step
every half second.

Careful: when a step is found no longer ours, its `lost` is set so its work can stop;
its commit would fail anyway.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from agentq.runtime.timers import Timer, Timers
from agentq.store import Store

log = logging.getLogger(__name__)

# Statements carry at most this many steps each (a process with more runs several).
BATCH = 500
MIN_PERIOD_S = 0.05


@dataclass(eq=False)
class Heartbeat:
    """One step's lease while its block runs; `lost` is set once the step is not ours."""

    leases: Leases
    step_key: str
    worker: str
    period_s: float | None  # set: the step must hear of an interrupt this often
    lost: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> Heartbeat:
        self.leases._hold(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.leases._drop(self)


class Leases:
    """Keeps the lease of each step this process runs: the one place a lease is renewed.

    Every `lease_s / 3` one statement renews them all; a step that asks for a `period_s`
    (a model step, which must hear of an interrupt soon) is also checked that often, all
    such steps with one SELECT.
    """

    def __init__(
        self, store: Store, clock: Callable[[], datetime], timers: Timers, *, lease_s: float
    ) -> None:
        self._store = store
        self._clock = clock
        self._timers = timers
        self.lease_s = lease_s
        self._renew_s = max(lease_s / 3.0, MIN_PERIOD_S)
        self._lock = threading.Lock()
        self._held: dict[Heartbeat, None] = {}
        self._timer: Timer | None = None
        self._tick_s = self._renew_s
        self._renewed_at = time.monotonic()

    def kept(self, step_key: str, worker: str, *, period_s: float | None = None) -> Heartbeat:
        """`worker`'s lease on the step, kept while the block runs (checked every `period_s`)."""
        return Heartbeat(self, step_key, worker, period_s)

    def held(self) -> int:
        """How many steps' leases this process keeps now."""
        with self._lock:
            return len(self._held)

    def _hold(self, beat: Heartbeat) -> None:
        tick_s = max(min(self._renew_s, beat.period_s or self._renew_s), MIN_PERIOD_S)
        with self._lock:
            self._held[beat] = None
            if self._timer is not None and tick_s >= self._tick_s:
                return
            if self._timer is not None:
                self._timer.cancel()
            else:
                self._renewed_at = time.monotonic()
            self._tick_s = tick_s
            self._timer = self._timers.call_every(tick_s, self._tick)

    def _drop(self, beat: Heartbeat) -> None:
        with self._lock:
            self._held.pop(beat, None)
            if not self._held and self._timer is not None:
                self._timer.cancel()
                self._timer = None
                self._tick_s = self._renew_s

    def _tick(self) -> None:
        """Renew every lease if a renewal is due, else check the steps that ask for it."""
        due = time.monotonic() - self._renewed_at >= self._renew_s - self._tick_s / 2
        with self._lock:
            beats = [b for b in self._held if due or b.period_s is not None]
        if not beats:
            return
        try:
            if due:
                ours = self._each_batch(beats, lambda held: self._store.leases.renew(
                    held, lease_s=self.lease_s, now=self._clock()))
                self._renewed_at = time.monotonic()
            else:
                ours = self._each_batch(beats, self._store.leases.list_owned)
        except Exception:  # retried next period; a lease outlives two missed renewals
            log.warning("lease renewal failed", exc_info=True)
            return
        for beat in beats:
            if beat.step_key not in ours:
                beat.lost.set()
                self._drop(beat)

    @staticmethod
    def _each_batch(beats: list[Heartbeat], query: Callable[[list[tuple[str, str]]], set[str]]
                    ) -> set[str]:
        ours: set[str] = set()
        for start in range(0, len(beats), BATCH):
            ours |= query([(b.step_key, b.worker) for b in beats[start:start + BATCH]])
        return ours
