"""What agentq's Celery app sets when its broker is RabbitMQ (an `amqp://` URL).

The queues are quorum queues (replicated, kept across a broker restart) behind topic
exchanges, so Celery's native delayed delivery holds ETA tasks (backoff waits, deadlines)
in the broker instead of in a worker's memory: a direct exchange cannot route a delayed
task back to its queue, and Celery would fall back to holding it in a worker. A quorum queue
takes no global prefetch; `worker_detect_quorum_queues` gives each consumer its own.

RabbitMQ pushes tasks to a consumer up to its prefetch, so a worker that froze (a long pause,
SIGSTOP) keeps receiving them, the sweeper's re-sent steps too, until the broker finds its
connection dead. Worker connections send heartbeats every few seconds, so the broker does
within about three of them (some 12 s; Celery's default of 120 s would leave them there for
minutes) and requeues what the worker held. Only workers' consuming connections use
heartbeats; the API's and beat's publishing connections do not.
"""
from __future__ import annotations

from celery.worker.consumer import Consumer as CeleryConsumer
from celery.worker.consumer.delayed_delivery import DelayedDelivery as CeleryDelayedDelivery
from kombu import Connection
from kombu.common import Broadcast

AMQP_SCHEMES = frozenset({"amqp", "amqps", "pyamqp"})
HEARTBEAT_S = 4
CELERY_DELAYED_DELIVERY = "celery.worker.consumer.delayed_delivery:DelayedDelivery"

SETTINGS = {
    "task_default_queue_type": "quorum",
    "task_default_exchange_type": "topic",
    "broker_native_delayed_delivery_queue_type": "quorum",
    "worker_detect_quorum_queues": True,
    "broker_heartbeat": HEARTBEAT_S,
    "worker_consumer": "agentq.worker.rabbitmq:Consumer",
}


def is_amqp(broker_url: str) -> bool:
    """Whether the broker is RabbitMQ (an AMQP URL: kombu's amqp transport, never agentq's)."""
    return broker_url.split("://", 1)[0].lower() in AMQP_SCHEMES


class DelayedDelivery(CeleryDelayedDelivery):
    """Celery's step, declaring every queue of the app before binding it to the delayed
    exchanges: Celery binds them all, and a worker started with -Q for some of them failed
    on the exchanges of the others ("no exchange"), logging that native delayed delivery
    was off. Declared, a queue also keeps the tasks sent to it before its own workers start."""

    def _bind_queues(self, app, connection: Connection) -> None:
        channel = connection.default_channel
        for queue in app.amqp.queues.values():
            if not isinstance(queue, Broadcast):
                queue(channel).declare()
        super()._bind_queues(app, connection)


class Consumer(CeleryConsumer):
    """Celery's worker consumer with agentq's DelayedDelivery step in place of Celery's."""

    class Blueprint(CeleryConsumer.Blueprint):
        default_steps = [
            "agentq.worker.rabbitmq:DelayedDelivery" if step == CELERY_DELAYED_DELIVERY else step
            for step in CeleryConsumer.Blueprint.default_steps
        ]
