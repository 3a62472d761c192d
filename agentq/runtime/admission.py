"""Which steps a worker process takes on now: no more claims than it can move forward, and a
step that must run alone only when nothing else of the process is in flight.

A claim starts a lease and, if the process dies, costs every step it holds a death. So a
task waits here, its step still unclaimed (the broker keeps its message unacknowledged,
the sweeper re-drives it if the process dies), until the process has room: fewer than
`starting` steps between their claim and the start of their work (each of those needs a
pooled database connection and the CPU now; a step whose model call is under way only
waits on the network), fewer than `limit` steps in flight, and no step running alone or
waiting to. A suspect step (one that died with others, `ledger.runs_alone`) waits until
every step in flight has ended, then runs while newcomers wait, so its death is its own.

Careful: the waits are on a Condition, which is green under gevent (Celery patches
threading before agentq is imported) and an OS lock under threads.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)


class Place:
    """One step's place in the process, from before its claim until it ends."""

    def __init__(self, admission: Admission) -> None:
        self._admission = admission
        self._starting = True

    def started(self) -> None:
        """The step's work began (it reached the model or the tool): another may be claimed."""
        if self._starting:
            self._starting = False
            self._admission._started()


class Admission:
    """The steps one process runs at once: shared room for most, the whole process for one."""

    def __init__(self, *, limit: int, starting: int) -> None:
        self.limit = limit
        self.starting = starting
        self._changed = threading.Condition()
        self._in_flight = 0
        self._starting = 0
        self._alone = 0  # steps running alone (0 or 1) or waiting to

    def in_flight(self) -> int:
        """Steps of this process between their claim and the start of their work."""
        with self._changed:
            return self._in_flight

    @contextmanager
    def among_others(self) -> Iterator[Place]:
        """Hold a place among the process's steps while the block runs."""
        with self._changed:
            if self._alone:  # said, so a task held back by a step running alone shows in the log
                log.info("task waits: a step runs alone in this process or waits to")
            self._changed.wait_for(lambda: not self._alone and self._in_flight < self.limit
                                   and self._starting < self.starting)
            self._enter()
        place = Place(self)
        try:
            yield place
        finally:
            self._leave(place)

    @contextmanager
    def alone(self) -> Iterator[Place]:
        """Hold the whole process while the block runs: once every step in flight has ended,
        and with newcomers held back meanwhile (one alone step at a time)."""
        with self._changed:
            self._alone += 1
            log.info("step waits to run alone: %d steps in flight, %d waiting to run alone",
                     self._in_flight, self._alone)
            try:
                self._changed.wait_for(lambda: self._in_flight == 0)
            except BaseException:
                self._alone -= 1
                self._changed.notify_all()
                raise
            self._enter()
        place = Place(self)
        try:
            yield place
        finally:
            with self._changed:
                self._alone -= 1
            self._leave(place)

    def _enter(self) -> None:
        self._in_flight += 1
        self._starting += 1

    def _started(self) -> None:
        with self._changed:
            self._starting -= 1
            self._changed.notify_all()

    def _leave(self, place: Place) -> None:
        place.started()
        with self._changed:
            self._in_flight -= 1
            self._changed.notify_all()
