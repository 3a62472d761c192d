"""Which steps a worker process takes on now: no more claims than it can move forward, and a
step that must run alone only when nothing else of the process is in flight.

A claim starts a lease and, if the process dies, costs every step it holds a death. So a
task waits here, its step still unclaimed, until the process has room: fewer than
`starting` steps between their claim and the start of their work (each of those needs a
pooled database connection and the CPU now; a step whose model call is under way only
waits on the network) and fewer than `limit` steps in flight.

A suspect step (one that died with others, `ledger.runs_alone`) waits until every step in
flight has ended, then runs with nothing beside it, so its death is its own. Meanwhile the
process is gated: a newcomer does not wait in it (a task waiting there would die with the
process, and with it the process's whole share of the work for as long as the suspect
takes). It is turned away (`Gated`) with its step unclaimed. The first time, its task is
sent again over the broker at once, for another process to take; if it comes back to this
one while the gate is still closed, what takes the step up again (its re-drive) is kept
here and handed out once the gate opens (`released`). So a task bounces between gated
processes once at most, and a process that dies with re-drives kept leaves those steps to
the sweeper, as any step whose task was lost.

Careful: the waits are on a Condition, which is green under gevent (Celery patches
threading before agentq is imported) and an OS lock under threads.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

Redrive = TypeVar("Redrive", bound=Hashable)  # what takes a step up again (a follow-up)


class Gated(Exception):
    """The process runs a step alone or waits to: the newcomer's step stays unclaimed.
    `send_now`: the caller sends its re-drive over the broker at once (the first time it
    was turned away here); else the re-drive is sent once the gate opens (`released`)."""

    def __init__(self, *, send_now: bool) -> None:
        super().__init__("a step runs alone in this process or waits to")
        self.send_now = send_now


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


class Admission(Generic[Redrive]):
    """The steps one process runs at once: shared room for most, the whole process for one."""

    def __init__(self, *, limit: int, starting: int) -> None:
        self.limit = limit
        self.starting = starting
        self._changed = threading.Condition()
        self._in_flight = 0
        self._starting = 0
        self._alone = 0  # steps running alone (0 or 1) or waiting to
        self._held: dict[Redrive, None] = {}  # re-drives of the steps turned away, in order
        self._bounced: set[Redrive] = set()  # re-drives sent away once while the gate is closed

    def in_flight(self) -> int:
        """Steps of this process between their claim and the start of their work."""
        with self._changed:
            return self._in_flight

    @contextmanager
    def among_others(self, redrive_of: Callable[[], Redrive]) -> Iterator[Place]:
        """Hold a place among the process's steps while the block runs; raise Gated if a step
        runs alone here or waits to (keeping the step's re-drive, made by `redrive_of` only
        then, for when the gate opens if it was turned away here before)."""
        with self._changed:
            self._changed.wait_for(lambda: self._alone or (self._in_flight < self.limit
                                                           and self._starting < self.starting))
            if self._alone:
                redrive = redrive_of()
                send_now = redrive not in self._bounced
                if send_now:
                    self._bounced.add(redrive)
                else:
                    self._held[redrive] = None
                log.info("task turned away: a step runs alone in this process or waits to;"
                         " its step is %s", "sent on at once" if send_now
                         else "taken up again when that ends")
                raise Gated(send_now=send_now)
            self._enter()
        place = Place(self)
        try:
            yield place
        finally:
            self._leave(place)

    @contextmanager
    def alone(self) -> Iterator[Place]:
        """Hold the whole process while the block runs: once every step in flight has ended,
        and with newcomers turned away meanwhile (one alone step at a time)."""
        with self._changed:
            self._alone += 1
            log.info("step waits to run alone: %d steps in flight, %d waiting to run alone",
                     self._in_flight, self._alone)
            self._changed.notify_all()  # steps waiting for room are turned away now
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

    def released(self) -> list[Redrive]:
        """The re-drives of the steps turned away, once no step runs alone or waits to: each
        once, for the caller to send."""
        with self._changed:
            if self._alone:
                return []
            self._bounced.clear()
            held, self._held = list(self._held), {}
            return held

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
