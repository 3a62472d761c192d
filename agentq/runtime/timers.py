"""The timers a worker process keeps for its steps: lease heartbeats and time limits.

One thread keeps the time and hands each due call to a reusable daemon thread
(`agentq.process.threads`), so starting a step starts no thread. The thread ends after `IDLE_S`
without timers, and a process forked with it running (Celery's prefork pool) starts its
own afresh.
"""
from __future__ import annotations

import contextvars
import functools
import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable

from agentq.process.threads import DaemonThreads

log = logging.getLogger(__name__)

IDLE_S = 10.0


class Timer:
    """One scheduled call; `cancel` stops it (a call already running finishes)."""

    def __init__(self, fn: Callable[[], object], period_s: float | None) -> None:
        self._run = contextvars.copy_context().run  # the caller's log context
        self.fn = fn
        self.period_s = period_s
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def fire(self) -> None:
        try:
            self._run(self.fn)
        except Exception:  # one timer's failure must not stop the others
            log.exception("timer callback failed")


class Timers:
    """Calls functions later, or every so often.

    One thread keeps the time and hands each due call to a pool thread, so a lease
    renewal stuck on a dead connection delays no other step's renewal or time limit. A
    periodic call is re-armed when it returns: it never overlaps itself.
    """

    def __init__(self, name: str = "agentq-timers") -> None:
        self._name = name
        self._calls = DaemonThreads(f"{name}-call")
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Timer]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def call_later(self, delay_s: float, fn: Callable[[], object]) -> Timer:
        return self._add(Timer(fn, None), delay_s)

    def call_every(self, period_s: float, fn: Callable[[], object]) -> Timer:
        """Call `fn` every `period_s`, first after one period, until cancelled."""
        return self._add(Timer(fn, period_s), period_s)

    def _add(self, timer: Timer, delay_s: float) -> Timer:
        if self._pid != os.getpid():
            self._reset()  # forked: the parent's thread did not come along
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + delay_s, next(self._order), timer))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
            elif self._heap[0][2] is timer:  # due before the one it sleeps for: wake it
                self._cond.notify()
        return timer

    def _next_due(self) -> Timer | None:
        """Wait for the next timer that is due; None once idle for IDLE_S (the thread ends)."""
        with self._cond:
            while True:
                while self._heap and self._heap[0][2].cancelled:
                    heapq.heappop(self._heap)
                if not self._heap:
                    if not self._cond.wait(IDLE_S) and not self._heap:
                        self._thread = None
                        return None
                    continue
                due, _, timer = self._heap[0]
                wait_s = due - time.monotonic()
                if wait_s <= 0:
                    heapq.heappop(self._heap)
                    return timer
                self._cond.wait(wait_s)

    def _loop(self) -> None:
        while (timer := self._next_due()) is not None:
            self._calls.submit(functools.partial(self._fire, timer))

    def _fire(self, timer: Timer) -> None:
        timer.fire()
        if timer.period_s is not None and not timer.cancelled:
            self._add(timer, timer.period_s)
