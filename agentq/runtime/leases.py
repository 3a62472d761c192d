"""The leases of a worker's running steps, kept alive by a heartbeat while their work goes on.

Careful: if a renewal finds the step no longer ours (the lease ran out and another
worker claimed it, or an interrupt cancelled it), `lost` is set so the work can stop;
its commit would fail anyway.
"""
from __future__ import annotations

import logging
import threading
from datetime import datetime
from typing import Callable

from agentq.runtime.timers import Timer, Timers
from agentq.store import Store

log = logging.getLogger(__name__)


class Heartbeat:
    """Renews the lease every lease_s/3 (or `period_s`) on the process's timer thread.

    A shorter period makes an interrupt close a model stream sooner: the interrupt
    cancels the step, and the next renewal finds it gone.
    """

    def __init__(
        self,
        renew: Callable[[], bool],
        *,
        timers: Timers,
        lease_s: float,
        period_s: float | None = None,
        lost: threading.Event | None = None,
    ) -> None:
        self._renew = renew
        self._timers = timers
        self._period_s = max(min(lease_s / 3.0, period_s or lease_s), 0.05)
        self.lost = lost if lost is not None else threading.Event()
        self._timer: Timer | None = None

    def __enter__(self) -> Heartbeat:
        self._timer = self._timers.call_every(self._period_s, self._beat)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _beat(self) -> None:
        try:
            still_ours = self._renew()
        except Exception:  # a failed renewal is retried next period
            log.warning("lease renewal failed", exc_info=True)
            return
        if not still_ours and self._timer is not None:
            self.lost.set()
            self._timer.cancel()


class Leases:
    """Keeps the lease of each step this process runs: the one place a lease is renewed.

    Each step gets a heartbeat of its own on the process's timer thread; a step asks for
    a shorter `period_s` when it must hear of an interrupt sooner.
    """

    def __init__(
        self, store: Store, clock: Callable[[], datetime], timers: Timers, *, lease_s: float
    ) -> None:
        self._store = store
        self._clock = clock
        self._timers = timers
        self.lease_s = lease_s

    def kept(self, step_key: str, worker: str, *, period_s: float | None = None) -> Heartbeat:
        """A heartbeat for `worker`'s lease on the step, running while the block runs."""

        def renew() -> bool:
            return self._store.heartbeat_step(
                step_key, worker=worker, lease_s=self.lease_s, now=self._clock()
            )

        return Heartbeat(renew, timers=self._timers, lease_s=self.lease_s, period_s=period_s)
