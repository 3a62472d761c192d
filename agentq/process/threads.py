"""Reusable daemon threads, for calls that may never return: a tool call, a timer's callback.

Starting a thread per call made every step wait for the new thread to be scheduled, a
millisecond or more on a busy worker. These threads are started on demand, reused, and
end after `IDLE_S` without work, so a process that stops running steps (or a test that
builds many runtimes) keeps none. A process forked with these threads running (Celery's
prefork pool) starts its own afresh.
"""
from __future__ import annotations

import contextvars
import itertools
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

IDLE_S = 10.0


class DaemonThreads:
    """Runs calls on reusable daemon threads, one call per thread at a time.

    Daemon threads, not a ThreadPoolExecutor: a call that never returns is abandoned by
    its caller, and it must not keep the process from exiting. An abandoned thread
    rejoins the idle ones if its call ever ends; the pool grows to as many calls as run
    at once.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._work: queue.SimpleQueue[tuple[Callable[..., Any], Callable[[], Any], Future[Any]]]
        self._work = queue.SimpleQueue()
        self._idle = 0
        self._started = itertools.count(1)

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        """`fn()` on a pool thread, in the caller's context (its log fields)."""
        if self._pid != os.getpid():
            self._reset()
        future: Future[Any] = Future()
        self._work.put((contextvars.copy_context().run, fn, future))
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
                return future
        threading.Thread(target=self._serve, name=f"{self._name}-{next(self._started)}",
                         daemon=True).start()
        return future

    def _serve(self) -> None:
        while True:
            try:
                run, fn, future = self._work.get(timeout=IDLE_S)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0:  # another thread waits too: this one may go
                        self._idle -= 1
                        return
                continue
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(run(fn))
                except BaseException as exc:  # the caller decides what a failure means
                    future.set_exception(exc)
            with self._lock:
                self._idle += 1
