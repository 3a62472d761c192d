"""What a worker process does as Celery starts and stops it: the sweeper candidate, the
announcement of its slots, the refusal of a blocking database driver under gevent, the log
format, tracing, the startup heap set aside from the garbage collector, and shutdown
callbacks."""
from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from typing import Protocol

from celery import Celery, signals
from celery.concurrency.prefork import TaskPool as PreforkPool

from agentq.followups import FollowUp
from agentq.process.heap import freeze_startup_heap
from agentq.process.logs import use_format
from agentq.runtime import Runtime
from agentq.runtime.shares import SlotOffer
from agentq.runtime.sweeper import Sweeper
from agentq.telemetry import tracing
from agentq.worker.queues import TIMERS


def connect_process(log_format: str) -> None:
    """Connect what every worker of this process needs, deployed or embedded: the refusal of
    a blocking database driver under gevent, and the log format. Connecting again is a no-op."""
    def format_worker_logs(logger: logging.Logger, **_: object) -> None:
        """Celery made the worker's log handlers; give them AGENTQ_LOG_FORMAT and the step context."""
        use_format(logger, log_format)

    signals.worker_init.connect(refuse_a_blocking_driver,
                                dispatch_uid="agentq.refuse_a_blocking_driver")
    connect_tracing()
    signals.after_setup_logger.connect(format_worker_logs, weak=False,
                                       dispatch_uid="agentq.format_worker_logs")
    signals.after_setup_task_logger.connect(format_worker_logs, weak=False,
                                            dispatch_uid="agentq.format_task_logs")


def connect_tracing() -> None:
    """Set tracing up where tasks run, once forked (a prefork child, or the worker's own
    process for the other pools; beat too), and export what is left as each one stops."""
    def set_up(**_: object) -> None:
        tracing()

    def flush(**_: object) -> None:
        tracing().flush()

    for signal in (signals.worker_process_init, signals.worker_ready, signals.beat_init):
        signal.connect(set_up, weak=False, dispatch_uid=f"agentq.tracing.{signal.name}")
    for signal in (signals.worker_process_shutdown, signals.worker_shutdown):
        signal.connect(flush, weak=False, dispatch_uid=f"agentq.tracing_flush.{signal.name}")


def connect_sweeper(app: Celery, runtime: Callable[[], Runtime],
                    enqueue: Callable[[list[FollowUp]], None]) -> None:
    """Give a deployed worker of `app` its sweeper candidate, started and stopped with it.

    `runtime` builds this process's Runtime; `enqueue` sends what the sweeper finds due.
    Only a worker that takes the timers queue has one; the sweeper lock makes one
    candidate of the deployment lead. Connected by the composition root
    (agentq.worker.main), once per process.
    """
    def sweeper(_slots: int) -> Sweeper | None:
        if TIMERS not in app.amqp.queues.consume_from:
            return None
        started = runtime().sweeper(enqueue)
        started.start()
        return started

    _while_tasks_run(app, sweeper)


def connect_slots(app: Celery, runtime: Callable[[], Runtime]) -> None:
    """Have a deployed worker of `app` announce its slots on each queue it takes, where steps
    are claimed, while it runs: tenants' default shares derive from them (inv. 9,
    `agentq.runtime.shares`). A prefork child offers one slot; a threads, gevent or solo
    worker its concurrency. Connected by the composition root, once per process.
    """
    def offer(slots: int) -> SlotOffer:
        rt = runtime()
        worker = f"{socket.gethostname()}:{os.getpid()}"
        queues = dict.fromkeys(app.amqp.queues.consume_from, slots)
        return SlotOffer(rt.store, rt.clock, worker, queues).start()

    _while_tasks_run(app, offer)


def connect_heap_freeze() -> None:
    """Freeze the startup heap (`freeze_startup_heap`) in each process of a worker once it is
    ready: the worker's own process (for prefork, the parent, which runs no task), and each
    prefork child as it starts. Connected by the composition root after the handlers that
    build the runtime, so it is frozen with the rest."""
    def freeze(**_: object) -> None:
        freeze_startup_heap()

    signals.worker_ready.connect(freeze, weak=False, dispatch_uid="agentq.freeze_heap")
    signals.worker_process_init.connect(freeze, weak=False,
                                        dispatch_uid="agentq.freeze_heap_in_child")


class _Stoppable(Protocol):
    def stop(self) -> None: ...


def _while_tasks_run(app: Celery, start: Callable[[int], _Stoppable | None]) -> None:
    """Run `start(slots)` once in each process where a worker of `app` runs tasks, and stop
    what it started when that worker stops; `start` may return None to start nothing (it
    is asked again at the next signal).

    Where tasks run: in each child of a prefork worker, with one slot (never in the parent,
    which forks children later), and in the worker's own process for the other pools
    (threads, gevent), with its concurrency.
    """
    started: list[_Stoppable] = []

    def begin(slots: int) -> None:
        if started:
            return
        running = start(slots)
        if running is not None:
            started.append(running)

    def in_pool_process(**_: object) -> None:
        begin(1)  # a prefork child runs one task at a time (the solo pool: its only slot)

    def in_worker(sender: object, **_: object) -> None:
        pool = getattr(sender, "pool", None)
        if getattr(sender, "app", None) is app and not isinstance(pool, PreforkPool):
            begin(max(1, int(getattr(pool, "limit", None) or 1)))  # threads, gevent

    def stop(**_: object) -> None:
        """A stopping worker gives up what it holds at once (the sweeper lock, its slots)."""
        while started:
            started.pop().stop()

    signals.worker_process_init.connect(in_pool_process, weak=False)
    signals.worker_ready.connect(in_worker, weak=False)
    signals.worker_process_shutdown.connect(stop, weak=False)
    signals.worker_shutdown.connect(stop, weak=False)


def refuse_a_blocking_driver(**_: object) -> None:
    """Under `-P gevent` every model call of the process shares one thread: a database driver
    that blocks it would stall them all, so the worker does not start.

    Tools may block in C or compute, so the default deployment runs them on a worker of OS
    threads (`-P threads`, queue agentq.tools). They cannot simply be handed to OS threads
    inside a gevent process: its locks are green, and deadlock when OS threads contend.
    """
    from agentq.process.cooperative import patched
    from agentq.store.engine import psycopg_waits_in_c

    if patched() and psycopg_waits_in_c():
        raise SystemExit(
            "agentq: psycopg waits in C and would block the gevent hub (it was imported before "
            "gevent patched select, or PSYCOPG_WAIT_FUNC is set); start the worker with "
            "`celery -A agentq.worker:app worker -P gevent`, which patches first"
        )


def when_shutting_down(callback: Callable[[], None]) -> None:
    """Call `callback` as soon as a worker of this process begins to shut down (SIGINT, SIGTERM)."""
    signals.worker_shutting_down.connect(lambda **_: callback(), weak=False)
