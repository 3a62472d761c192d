"""Sending a batch of agentq's tasks on one producer, each queue declared once per channel.

Why: Celery asks kombu to declare a task's queue on every send, and kombu answers from its
record of what the connection declared, but only after copying the queue and its exchange
to bind them to the channel and wrapping the check in a retry: a quarter of the
instructions of a send (1.00 M → 0.74 M, docs/benchmarks.md), paid by every step. A
`Sender` lets Celery declare a queue on a broker channel the first time it sends there, as
before, and sends later tasks to that queue on that channel without asking again. A channel
opened after the broker connection was lost starts with no record, so its first send to
each queue declares it again, as kombu's own record (cleared on reconnect) would.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any
from weakref import WeakKeyDictionary

from celery import Celery

# What Celery would show for the keyword arguments agentq's tasks never take, given so that
# it does not work it out at every send (`saferepr({})`: 1% of a gevent worker's CPU).
NO_KWARGS = "{}"
# broker channel -> the queues a send on it declared
_DECLARED: WeakKeyDictionary[Any, set[str]] = WeakKeyDictionary()


class Sender:
    """Sends tasks on one producer from the app's pool, taken at the first send."""

    def __init__(self, app: Celery, stack: ExitStack) -> None:
        self._app = app
        self._stack = stack
        self._producer: Any = None

    def send(self, name: str, *, args: list[Any], queue: str | None = None,
             **options: Any) -> None:
        """`app.send_task(name, args=args, queue=queue, **options)`: to `queue`, or where the
        app's routes send `name` (an operator's celeryconfig may route it elsewhere).

        Its reply address is the app's, not the sending thread's, which Celery works out
        anew in each greenlet (1% of a gevent worker's CPU): agentq keeps no task results,
        and Celery's own result backend that replies (rpc) reads the app's."""
        if self._producer is None:
            self._producer = self._stack.enter_context(self._app.producer_or_acquire())
        producer = self._producer
        routed = self._app.amqp.router.route({"queue": queue} if queue else {}, name, args)
        to = routed["queue"]
        declared = _DECLARED.get(producer.channel)
        again = declared is not None and to.name in declared
        self._app.send_task(name, args=args, queue=to, producer=producer,
                            declare=[] if again else None, kwargsrepr=NO_KWARGS,
                            reply_to=self._app.oid, **options)
        if not again:
            _DECLARED.setdefault(producer.channel, set()).add(to.name)


@contextmanager
def sender(app: Celery) -> Iterator[Sender]:
    """A `Sender` for the block; its producer goes back to the pool at the end."""
    with ExitStack() as stack:
        yield Sender(app, stack)
