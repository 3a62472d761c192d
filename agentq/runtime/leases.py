"""The heartbeat that keeps a running step's lease alive while its work goes on.

Careful: if a renewal finds the step no longer ours (the lease ran out and another
worker claimed it), `lost` is set so the work can stop; its commit would fail anyway.
"""
from __future__ import annotations

import logging
import threading
from datetime import datetime
from typing import Callable

from agentq.runtime.timers import Timer, Timers

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


def renewal(store, step_key: str, worker: str, lease_s: float, clock: Callable[[], datetime]):
    """The renew callable for one step's lease."""
    return lambda: store.heartbeat_step(step_key, worker=worker, lease_s=lease_s, now=clock())
