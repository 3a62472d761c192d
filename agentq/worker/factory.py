"""The Celery app factory: the settings agentq relies on, its queues and its beat schedule.

Task ids of steps are uuid5(step_key) (docs/design.md §4); Celery does not de-duplicate them,
the ledger does. Tasks go to a queue per kind of work (agentq.worker.queues).

Two brokers are supported: Redis (the default; through agentq.worker.transport) and
RabbitMQ (`amqp://`, kombu's own transport, set up as agentq.worker.rabbitmq says).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING

from celery import Celery
from celery.app.amqp import AMQP
from kombu import Exchange, Queue

from agentq.config import Config
from agentq.runtime import Runtime
from agentq.worker import rabbitmq, transport
from agentq.worker.queues import MODEL, NO_TOOL_QUEUES, TASK_QUEUES, all_queues
from agentq.worker.task_events import BatchedTaskEvents
from agentq.worker.tasks import no_deliveries, no_firing, register_tasks

if TYPE_CHECKING:
    from agentq.commands.firing import Firing
    from agentq.webhooks.delivery import Deliveries

# What agentq's workers run with. An operator tunes the few that are theirs to tune in
# celeryconfig.py (task events, the visibility timeout, the ETA limit); the rest is what
# agentq relies on.
CELERY_DEFAULTS = {
    # a task is acked when it finishes, and a lost worker's tasks come back: steps are
    # idempotent (the ledger), so running one again is safe, losing one is not
    "task_acks_late": True,
    "task_reject_on_worker_lost": True,
    # A deploy's SIGTERM is Celery's warm shutdown, left as it is: the worker takes nothing
    # new, finishes the steps it runs (seconds each; a step cut short runs again from its
    # start, a model call paid twice) and puts back what it received and had not started as
    # its broker channel closes. Celery's soft shutdown (worker_soft_shutdown_timeout) stays
    # off: it belongs to the cold shutdown (SIGQUIT), cancels the steps still running when
    # it ends, and waits inside a signal handler, which can fail on gevent's hub.
    # docs/operations.md, "Deploys and agent versions".
    "worker_prefetch_multiplier": 1,
    "task_serializer": "json",
    "accept_content": ["json"],
    "result_serializer": "json",
    "task_ignore_result": True,
    # One (disabled) result backend per process: Celery otherwise builds one per thread,
    # which under gevent is one for every task that sends a follow-up.
    "result_backend_thread_safe": True,
    "worker_send_task_events": True,
    "task_send_sent_event": False,  # about 15% of a step (bench/steps.py)
    # Redis keeps no copy of a delivered task to hand back after a visibility timeout: the
    # ledger and the sweeper take up whatever a dead worker held (within the sweep period,
    # not 300 s later, in bulk), and a task costs two Redis round trips less. A worker
    # that stops cleanly still puts back what it had not started. RabbitMQ acks for real.
    "broker_transport_options": {"visibility_timeout": 300, "ack_emulation": False},
    "worker_eta_task_limit": 1000,
    "broker_connection_retry_on_startup": True,
    # agentq.process.logs formats the worker's logs (worker.signals)
    "worker_hijack_root_logger": False,
    "worker_redirect_stdouts": False,
}


EMBEDDED_POLL_S = 0.005


class _BrokerAMQP(AMQP):
    """Celery's AMQP, connecting through agentq.worker.transport (one Redis client per channel)."""

    Connection = transport.Connection


def _project_overrides() -> dict:
    """Settings from a top-level `celeryconfig.py`, when one is importable."""
    try:
        module = importlib.import_module("celeryconfig")
    except ImportError:
        return {}
    return {k: v for k, v in vars(module).items() if not k.startswith("_") and k.islower()}


def create_celery(
    config: Config, runtime: Callable[[], Runtime],
    *, tool_queues: Mapping[str, str] = NO_TOOL_QUEUES,
    deliveries: Callable[[], Deliveries | None] = no_deliveries,
    firing: Callable[[], Firing | None] = no_firing,
) -> Celery:
    """A Celery app for `config`; `runtime` builds the Runtime once per worker process,
    `deliveries` its webhook sender (`wiring.deliveries_for`) and `firing` what fires its
    schedules (`wiring.firing_for`).

    `tool_queues` (tool name -> queue) are the tools' own queues: a worker started without
    `-Q` takes them too, and their calls are sent there.
    """
    app = celery_app("agentq")
    app.conf.update(_queues(tool_queues, amqp=rabbitmq.is_amqp(config.broker_url)))
    app.conf.update(_project_overrides())
    app.conf.update(
        broker_url=config.broker_url,
        beat_schedule={
            "agentq-sweep": {"task": "agentq.sweep", "schedule": timedelta(seconds=config.sweep_s)},
            "agentq-gc": {"task": "agentq.gc", "schedule": timedelta(hours=1)},
            "agentq-webhooks-relay": {"task": "agentq.webhooks.relay",
                                      "schedule": timedelta(seconds=config.webhook_poll_s)},
            # a tick that waited in the queue longer than a few ticks is dropped: the next does its work
            "agentq-schedules-tick": {"task": "agentq.schedules.tick",
                                      "schedule": timedelta(seconds=config.schedule_tick_s),
                                      "options": {"expires": max(5.0, 5 * config.schedule_tick_s)}},
        },
    )
    if config.embedded_broker:
        # memory:// is polled; kombu's default of 1 s would add up to a second to every hop.
        app.conf.update(worker_send_task_events=False, task_send_sent_event=False,
                        worker_enable_remote_control=False,
                        broker_transport_options={"polling_interval": EMBEDDED_POLL_S})
    register_tasks(app, runtime, tool_queues, deliveries, firing)
    return app


def celery_app(name: str) -> Celery:
    """A Celery app set up as agentq's workers are, with no tasks: the settings agentq
    relies on, its broker connection and batched task events (bench/floor.py runs its
    bare tasks on one)."""
    app = Celery(name, set_as_current=False, amqp=_BrokerAMQP)
    app.conf.update(CELERY_DEFAULTS)
    app.steps["consumer"].add(BatchedTaskEvents)
    return app


def _queues(tool_queues: Mapping[str, str], *, amqp: bool = False) -> dict:
    """Every queue declared (a worker without -Q takes them all), each task routed to its own."""
    if amqp:
        queues = [Queue(name, Exchange(name, type="topic"), routing_key=name,
                        queue_arguments={"x-queue-type": "quorum"})
                  for name in all_queues(tool_queues)]
    else:
        queues = [Queue(name, Exchange(name), routing_key=name) for name in all_queues(tool_queues)]
    return {
        "task_queues": queues,
        "task_routes": {name: {"queue": queue} for name, queue in TASK_QUEUES.items()},
        "task_default_queue": MODEL,
        **(rabbitmq.SETTINGS if amqp else {}),
    }
