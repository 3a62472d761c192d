"""The Celery app and its thin task shims; the only module that imports celery.

Each task calls the runtime and sends the follow-ups it returns. Task ids of steps are
uuid5(step_key) (DESIGN section 4); Celery does not de-duplicate them, the ledger does.
Tasks go to a queue per kind of work (agentq.queues).
"""
from __future__ import annotations

import functools
import importlib
import logging
import os
import socket
import sys
import warnings
from collections.abc import Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import Callable, Iterable

from celery import Celery, Task, bootsteps, signals
from celery.app.amqp import AMQP
from celery.concurrency.prefork import TaskPool as PreforkPool
from celery.exceptions import SecurityWarning
from kombu import Exchange, Queue
from kombu.exceptions import OperationalError

from agentq import broker
from agentq.config import Config
from agentq.core.keys import task_id
from agentq.followups import Advance, Compact, Expire, FollowUp, RunTool
from agentq.logconfig import log_context, use_format
from agentq.own_keys import OwnKeys, keybox_for
from agentq.policy import Policy
from agentq.queues import MODEL, TASK_QUEUES, TIMERS, all_queues
from agentq.runtime import Runtime
from agentq.runtime.shares import SlotOffer
from agentq.runtime.sweeper import Sweeper
from agentq.tools import Registry

log = logging.getLogger(__name__)

CELERY_DEFAULTS = {
    "task_acks_late": True,
    "task_reject_on_worker_lost": True,
    "worker_prefetch_multiplier": 1,
    "task_serializer": "json",
    "accept_content": ["json"],
    "result_serializer": "json",
    "task_ignore_result": True,
    "result_backend_thread_safe": True,  # see celeryconfig.py
    "worker_send_task_events": True,
    "task_send_sent_event": False,  # see celeryconfig.py
    "broker_transport_options": {"visibility_timeout": 300},
    "worker_eta_task_limit": 1000,
    "broker_connection_retry_on_startup": True,
    "worker_hijack_root_logger": False,
    "worker_redirect_stdouts": False,
}


EMBEDDED_POLL_S = 0.005
TASK_EVENTS_FLUSH_S = 0.5  # how late Flower may see a task event
# Never flushed by the task that sends an event: that flush holds the dispatcher's lock
# through a broker round trip, and every task sending an event meanwhile queues behind it
# to flush again, one round trip each.
TASK_EVENTS_UNFLUSHED = sys.maxsize
NO_TOOL_QUEUES: Mapping[str, str] = MappingProxyType({})


class _BrokerAMQP(AMQP):
    """Celery's AMQP, connecting through agentq.broker (one Redis client per channel)."""

    Connection = broker.Connection


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
) -> Celery:
    """A Celery app for `config`; `runtime` builds the Runtime once per worker process.

    `tool_queues` (tool name -> queue) are the tools' own queues: a worker started without
    `-Q` takes them too, and their calls are sent there.
    """
    app = celery_app("agentq")
    app.conf.update(_queues(tool_queues))
    app.conf.update(_project_overrides())
    app.conf.update(
        broker_url=config.broker_url,
        beat_schedule={
            "agentq-sweep": {"task": "agentq.sweep", "schedule": timedelta(seconds=config.sweep_s)},
            "agentq-gc": {"task": "agentq.gc", "schedule": timedelta(hours=1)},
        },
    )
    if config.embedded_broker:
        # memory:// is polled; kombu's default of 1 s would add up to a second to every hop.
        app.conf.update(worker_send_task_events=False, task_send_sent_event=False,
                        worker_enable_remote_control=False,
                        broker_transport_options={"polling_interval": EMBEDDED_POLL_S})
    _register_tasks(app, runtime, tool_queues)
    return app


def celery_app(name: str) -> Celery:
    """A Celery app set up as agentq's workers are, with no tasks: the settings agentq
    relies on, its broker connection and batched task events (bench/floor.py runs its
    bare tasks on one)."""
    app = Celery(name, set_as_current=False, amqp=_BrokerAMQP)
    app.conf.update(CELERY_DEFAULTS)
    app.steps["consumer"].add(BatchedTaskEvents)
    return app


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


def _queues(tool_queues: Mapping[str, str]) -> dict:
    """Every queue declared (a worker without -Q takes them all), each task routed to its own."""
    return {
        "task_queues": [Queue(name, Exchange(name), routing_key=name)
                        for name in all_queues(tool_queues)],
        "task_routes": {name: {"queue": queue} for name, queue in TASK_QUEUES.items()},
        "task_default_queue": MODEL,
    }


def _register_tasks(
    app: Celery, runtime: Callable[[], Runtime], tool_queues: Mapping[str, str]
) -> None:
    def step(conversation_id: str, work: Callable[[Runtime], list[FollowUp]]) -> None:
        """Run a step and send its follow-ups, then publish its notices (Notices.held)."""
        rt = runtime()
        with log_context(conversation_id=conversation_id), rt.notices.held():
            followups = work(rt)
            _crash_point("after_commit", followups)
            enqueue(app, followups, tool_queues=tool_queues)

    @app.task(name="agentq.advance", shared=False, bind=True)
    def advance(self: Task, conversation_id: str) -> None:
        step(conversation_id, lambda rt: rt.advance(conversation_id, task_id=self.request.id))

    @app.task(name="agentq.run_tool", shared=False)
    def run_tool(conversation_id: str, tool_call_id: str) -> None:
        step(conversation_id, lambda rt: rt.run_tool(conversation_id, tool_call_id))

    @app.task(name="agentq.compact", shared=False, bind=True)
    def compact(self: Task, conversation_id: str, to_seq: int) -> None:
        step(conversation_id,
             lambda rt: rt.compact(conversation_id, to_seq, task_id=self.request.id))

    @app.task(name="agentq.expire", shared=False)
    def expire(conversation_id: str, tool_call_id: str) -> None:
        step(conversation_id, lambda rt: rt.expire(conversation_id, tool_call_id))

    @app.task(name="agentq.sweep", shared=False)
    def sweep() -> None:
        enqueue(app, runtime().sweep(), tool_queues=tool_queues)

    @app.task(name="agentq.gc", shared=False)
    def gc() -> int:
        return runtime().gc()

    @app.task(name="agentq.ping", shared=False)
    def ping(reply_to: str) -> None:
        """Push onto the Redis list `reply_to`: proves a worker takes tasks (and times a hop)."""
        runtime().pubsub.client.rpush(reply_to, "pong")


def enqueue(
    app: Celery, followups: Iterable[FollowUp],
    *, tool_queues: Mapping[str, str] = NO_TOOL_QUEUES,
) -> None:
    """Send each follow-up as its task; step tasks carry their deterministic id.

    Each task goes to its kind's queue (the app's task_routes), a tool call to its tool's
    own queue if it names one (`tool_queues`). `argsrepr` is what Flower and the worker log
    show as a task's arguments: named ids and the tool, instead of a bare list of uuids.
    """
    for item in followups:
        match item:
            case Advance(conversation_id=cid, eta=eta):
                app.send_task("agentq.advance", args=[cid], argsrepr=f"conversation={cid}", eta=eta)
            case RunTool(conversation_id=cid, tool_call_id=call_id, step_key=key, tool=tool):
                app.send_task("agentq.run_tool", args=[cid, call_id], task_id=task_id(key),
                              queue=tool_queues.get(tool or ""), argsrepr=_call_repr(item))
            case Expire(conversation_id=cid, tool_call_id=call_id, step_key=key, eta=eta):
                app.send_task("agentq.expire", args=[cid, call_id], task_id=task_id(key), eta=eta,
                              argsrepr=_call_repr(item))
                if eta is not None:
                    _announce_waiting(app, task_id(key), item)
            case Compact(conversation_id=cid, to_seq=to_seq, step_key=key):
                app.send_task("agentq.compact", args=[cid, to_seq], task_id=task_id(key),
                              argsrepr=f"conversation={cid} to_seq={to_seq}")


WAITING_EVENT = "task-waiting"


def _call_repr(item: RunTool | Expire) -> str:
    tool = f"tool={item.tool} " if item.tool else ""
    return f"{tool}conversation={item.conversation_id} call={item.tool_call_id}"


def _announce_waiting(app: Celery, expire_task_id: str, item: Expire) -> None:
    """Mark the expire task of a pending call WAITING in Flower: a person has the next move.

    Celery's event state (which Flower keeps) takes a custom `task-<name>` event as the
    task's state `<NAME>`; the task's own events later end it as SUCCESS. Display only: a
    lost event costs the label, never the call.
    """
    if not app.conf.worker_send_task_events:
        return
    current = app.current_worker_task
    hostname = current.request.hostname if current is not None else None
    try:
        with app.events.default_dispatcher(hostname=hostname) as dispatcher:
            dispatcher.send(WAITING_EVENT, uuid=expire_task_id, tool=item.tool,
                            conversation_id=item.conversation_id, tool_call_id=item.tool_call_id)
    except (OSError, OperationalError) as exc:
        log.warning("could not send %s for call %s: %s", WAITING_EVENT, item.tool_call_id, exc)


def _crash_point(name: str, followups: list[FollowUp]) -> None:
    """Test hook: die at `name` once, if AGENTQ_CRASH_AT names it and its flag file exists.

    Crash tests need a kill at an exact instant (after a step's commit, before the enqueue
    of its follow-ups; not the sweeper's sends); the flag file makes it happen once, so the
    replacement worker survives.
    """
    if not followups or os.environ.get("AGENTQ_CRASH_AT") != name:
        return
    flag = os.environ.get("AGENTQ_CRASH_FLAG", "")
    if flag and os.path.exists(flag):
        os.unlink(flag)
        os._exit(137)


def quiet_in_process_worker() -> None:
    """Silence what only a server deployment needs to hear, for an embedded worker.

    memory:// has no host, so kombu warns that it "reverts to localhost"; and Celery warns
    about running as root, which concerns a worker that takes tasks from a network broker,
    not one that only serves its own process.
    """
    logging.getLogger("kombu.connection").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=SecurityWarning)


def build_runtime(
    config: Config, policy: Policy | None = None, registry: Registry | None = None
) -> Runtime:
    """Wire store, registry, pub/sub and the operator's policy for one process."""
    from agentq.providers.access import ModelAccess
    from agentq.pubsub import PubSub
    from agentq.clock import utcnow
    from agentq.store import Store

    store = Store.open(config.database_url, event_cache=config.event_cache)
    policy = policy or Policy.from_config(config)
    own_keys = OwnKeys.from_config(config, store, policy, utcnow)
    access = ModelAccess(policy, own_keys.owner)
    return Runtime(
        store=store,
        registry=registry or Registry.from_modules(list(config.tools)),
        pubsub=PubSub(config.redis_url),
        config=config,
        providers=access.provider_for,
        endpoints=access.endpoint_url,
        running_steps=policy.running_steps,
    )


_config = Config.from_env()
# A policy the processes cannot use stops them at start, not at their first task.
_policy = Policy.from_config(_config)
keybox_for(_config, _policy)
# The tools, for the queues they name: a worker without -Q takes those too, Flower shows them.
_registry = Registry.from_modules(list(_config.tools))
_runtime = functools.cache(lambda: build_runtime(_config, _policy, _registry))
app = create_celery(_config, _runtime, tool_queues=_registry.queues)
_sweepers: list[Sweeper] = []
_offers: list[SlotOffer] = []


def _start_sweeper() -> None:
    """Start this process's sweeper candidate, if its worker takes the timers queue.

    It runs where tasks run: in each child of a prefork worker (never in the parent, which
    forks children later), in the worker's own process for the other pools. The sweeper
    lock makes one candidate of the deployment lead.
    """
    if _sweepers or TIMERS not in app.amqp.queues.consume_from:
        return
    sweeper = _runtime().sweeper(lambda due: enqueue(app, due, tool_queues=_registry.queues))
    sweeper.start()
    _sweepers.append(sweeper)


@signals.worker_process_init.connect
def _sweeper_in_pool_process(**_: object) -> None:
    _start_sweeper()  # a prefork child, or the solo pool's process


@signals.worker_ready.connect
def _sweeper_in_worker(sender: object, **_: object) -> None:
    if getattr(sender, "app", None) is app and not isinstance(getattr(sender, "pool", None),
                                                               PreforkPool):
        _start_sweeper()  # threads, gevent: tasks run in this process


@signals.worker_process_shutdown.connect
@signals.worker_shutdown.connect
def _stop_sweeper(**_: object) -> None:
    """A stopping worker gives the sweeper lock up at once: another candidate leads."""
    while _sweepers:
        _sweepers.pop().stop()


def _offer_slots(slots: int) -> None:
    """Announce this process's `slots` on each queue its worker takes, where steps are claimed:
    tenants' default shares of a queue derive from them (`agentq.runtime.shares`)."""
    if _offers:
        return
    queues = list(app.amqp.queues.consume_from)
    worker = f"{socket.gethostname()}:{os.getpid()}"
    rt = _runtime()
    _offers.append(SlotOffer(rt.store, rt.clock, worker, dict.fromkeys(queues, slots)).start())


@signals.worker_process_init.connect
def _slots_of_pool_process(**_: object) -> None:
    _offer_slots(1)  # a prefork child runs one task at a time


@signals.worker_ready.connect
def _slots_of_worker(sender: object, **_: object) -> None:
    pool = getattr(sender, "pool", None)
    if getattr(sender, "app", None) is app and not isinstance(pool, PreforkPool):
        _offer_slots(max(1, int(getattr(pool, "limit", None) or 1)))  # threads, gevent, solo


@signals.worker_process_shutdown.connect
@signals.worker_shutdown.connect
def _withdraw_slots(**_: object) -> None:
    while _offers:
        _offers.pop().stop()


@signals.worker_init.connect
def _refuse_a_blocking_driver(**_: object) -> None:
    """Under `-P gevent` every model call of the process shares one thread: a database driver
    that blocks it would stall them all, so the worker does not start.

    Tools may block in C or compute, so the default deployment runs them on a worker of OS
    threads (`-P threads`, queue agentq.tools). They cannot simply be handed to OS threads
    inside a gevent process: its locks are green, and deadlock when OS threads contend.
    """
    from agentq.cooperative import patched
    from agentq.store.engine import psycopg_waits_in_c

    if patched() and psycopg_waits_in_c():
        raise SystemExit(
            "agentq: psycopg waits in C and would block the gevent hub (it was imported before "
            "gevent patched select, or PSYCOPG_WAIT_FUNC is set); start the worker with "
            "`celery -A agentq.worker:app worker -P gevent`, which patches first"
        )


@signals.after_setup_logger.connect
@signals.after_setup_task_logger.connect
def _format_worker_logs(logger: logging.Logger, **_: object) -> None:
    """Celery made the worker's log handlers; give them AGENTQ_LOG_FORMAT and the step context."""
    use_format(logger, _config.log_format)


def when_shutting_down(callback: Callable[[], None]) -> None:
    """Call `callback` as soon as a worker of this process begins to shut down (SIGINT, SIGTERM)."""
    signals.worker_shutting_down.connect(lambda **_: callback(), weak=False)
