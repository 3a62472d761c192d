"""A worker bootstep that sends task events to the broker in batches, on every pool."""
from __future__ import annotations

import sys

from celery import bootsteps

TASK_EVENTS_FLUSH_S = 0.5  # how late Flower may see a task event
# Never flushed by the task that sends an event: that flush holds the dispatcher's lock
# through a broker round trip, and every task sending an event meanwhile queues behind it
# to flush again, one round trip each.
TASK_EVENTS_UNFLUSHED = sys.maxsize


class BatchedTaskEvents(bootsteps.StartStopStep):
    """Task events go to the broker in batches on every pool, not only where Celery batches them.

    Celery publishes each task event (received, started, succeeded) as a broker message of
    its own unless the worker runs its event loop (prefork); under gevent and threads that
    was about a fifth of a step's CPU (bench/capacity.py). A batch is one message, which
    Flower and every Celery event receiver take apart; each event keeps its own timestamp,
    so Flower shows the same times, at most TASK_EVENTS_FLUSH_S later.

    Careful: a flush publishes while tasks go on sending events (a green thread switches
    during the round trip, an OS thread runs beside it). Celery 5.7 clears only what it
    published; before, it emptied the buffer after the round trip and lost those events.
    """

    requires = ("celery.worker.consumer.events:Events",)

    def __init__(self, c: object, **kwargs: object) -> None:
        super().__init__(c, **kwargs)
        self.timer_entry = None

    def start(self, c) -> None:
        dispatcher = c.event_dispatcher
        if c.hub is not None or dispatcher is None or not dispatcher.enabled:
            return  # prefork batches already; no events, nothing to batch
        dispatcher.buffer_group = frozenset({"task"})
        dispatcher.buffer_limit = TASK_EVENTS_UNFLUSHED
        self.timer_entry = c.timer.call_repeatedly(TASK_EVENTS_FLUSH_S, self._flush, (c,))

    def stop(self, c) -> None:
        """Send what is buffered before Events closes the dispatcher (a step stops first)."""
        if self.timer_entry is not None:
            self.timer_entry.cancel()
            self.timer_entry = None
        self._flush(c)

    shutdown = stop

    @staticmethod
    def _flush(c) -> None:
        dispatcher = c.event_dispatcher
        if dispatcher is not None and dispatcher.buffer_group:
            dispatcher.flush(errors=False)
