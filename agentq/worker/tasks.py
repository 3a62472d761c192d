"""The thin task shims: each task calls the runtime, then `enqueue` sends the follow-ups it returns."""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from celery import Celery, Task
from kombu.exceptions import OperationalError

from agentq.core.decide import Step
from agentq.core.keys import task_id
from agentq.followups import Advance, Compact, Expire, FollowUp, RunTool, Settled
from agentq.process.logs import log_context
from agentq.runtime import Runtime
from agentq.worker.publishing import sender
from agentq.worker.queues import NO_TOOL_QUEUES

if TYPE_CHECKING:
    from agentq.commands.firing import Firing
    from agentq.webhooks.delivery import Deliveries

log = logging.getLogger(__name__)


def no_deliveries() -> Deliveries | None:
    """A process whose workers send no webhooks (the API's, a test's)."""
    return None


def no_firing() -> Firing | None:
    """A process whose workers fire no schedules (the API's, a test's)."""
    return None


def register_tasks(
    app: Celery, runtime: Callable[[], Runtime], tool_queues: Mapping[str, str],
    deliveries: Callable[[], Deliveries | None] = no_deliveries,
    firing: Callable[[], Firing | None] = no_firing,
) -> None:
    """The tasks of `app`, each calling the process's `runtime()` (or, for webhooks, its
    `deliveries()`: None where no encryption key seals secrets; for schedules, its `firing()`)."""
    @contextmanager
    def stepping(conversation_id: str) -> Iterator[Runtime]:
        """The runtime, for one step run in the block, which `send`s its follow-ups; then
        publish its notices (Notices.held), then wake what its freed slot lets run
        (`wakes_held`): neither the conversation's next step nor its streams wait for
        that read."""
        rt = runtime()
        with log_context(conversation_id=conversation_id):
            freed: list = []
            try:
                with rt.wakes_held() as freed, rt.notices.held():
                    yield rt
            finally:  # a step that raised freed its slot too: what waits for it is woken
                enqueue(app, rt.wake(freed), tool_queues=tool_queues)

    def send(followups: list[FollowUp]) -> None:
        enqueue(app, followups, tool_queues=tool_queues)

    @app.task(name="agentq.advance", shared=False, bind=True)
    def advance(self: Task, conversation_id: str) -> None:
        with stepping(conversation_id) as rt:
            send(rt.advance(conversation_id, task_id=self.request.id))

    @app.task(name="agentq.run_tool", shared=False)
    def run_tool(conversation_id: str, tool_call_id: str) -> None:
        with stepping(conversation_id) as rt:
            send(rt.run_tool(conversation_id, tool_call_id))

    @app.task(name="agentq.compact", shared=False, bind=True)
    def compact(self: Task, conversation_id: str, to_seq: int) -> None:
        with stepping(conversation_id) as rt:
            send(rt.compact(conversation_id, to_seq, task_id=self.request.id))

    @app.task(name="agentq.expire", shared=False)
    def expire(conversation_id: str, tool_call_id: str) -> None:
        with stepping(conversation_id) as rt:
            send(rt.expire(conversation_id, tool_call_id))

    @app.task(name="agentq.sweep", shared=False)
    def sweep() -> None:
        enqueue(app, runtime().sweep(), tool_queues=tool_queues)

    @app.task(name="agentq.gc", shared=False)
    def gc() -> int:
        return runtime().gc()

    @app.task(name="agentq.webhooks.relay", shared=False)
    def webhooks_relay() -> int:
        """Claim the webhook deliveries that are due and send one deliver task each."""
        sender = deliveries()
        if sender is None:
            return 0
        claimed = sender.relay()
        for item in claimed:
            app.send_task("agentq.webhooks.deliver", args=[item.id, item.attempts],
                          task_id=f"{item.id}:{item.attempts}",
                          argsrepr=f"webhook={item.id} {item.event_type} attempt={item.attempts}")
        return len(claimed)

    @app.task(name="agentq.webhooks.deliver", shared=False)
    def webhooks_deliver(delivery_id: str, attempt: int) -> str | None:
        """POST one attempt of a delivery; its outcome (never the receiver's body) is kept."""
        sender = deliveries()
        answer = None if sender is None else sender.deliver(delivery_id, attempt)
        return None if answer is None else answer.outcome

    @app.task(name="agentq.schedules.tick", shared=False)
    def schedules_tick() -> None:
        """Fire the schedules' due slots, once each however many ticks run (commands.firing)."""
        fire = firing()
        if fire is not None:
            enqueue(app, fire.tick(), tool_queues=tool_queues)

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
    own queue if it names one (`tool_queues`), all on one producer, which declares a queue
    once per channel (`agentq.worker.publishing`). `argsrepr` is what Flower and the worker
    log show as a task's arguments: named ids and the tool, instead of a bare list of uuids.
    """
    with sender(app) as tasks:
        for item in followups:
            match item:
                case Advance(conversation_id=cid, eta=eta):
                    tasks.send("agentq.advance", args=[cid],
                               argsrepr=f"conversation={cid}", eta=eta)
                case RunTool(conversation_id=cid, tool_call_id=call_id, step_key=key, tool=tool):
                    tasks.send("agentq.run_tool", args=[cid, call_id], task_id=task_id(key),
                               queue=tool_queues.get(tool or ""), argsrepr=_call_repr(item))
                case Expire(conversation_id=cid, tool_call_id=call_id, step_key=key, eta=eta):
                    tasks.send("agentq.expire", args=[cid, call_id], task_id=task_id(key), eta=eta,
                               argsrepr=_call_repr(item))
                    if eta is not None:
                        _announce(app, WAITING_EVENT, task_id(key), item, tool=item.tool)
                case Compact(conversation_id=cid, to_seq=to_seq, step_key=key):
                    tasks.send("agentq.compact", args=[cid, to_seq], task_id=task_id(key),
                               argsrepr=f"conversation={cid} to_seq={to_seq}")
                case Settled(conversation_id=cid, tool_call_id=call_id, outcome=outcome):
                    expire = task_id(Step.expire(cid, call_id).key)
                    _announce(app, SETTLED_EVENT, expire, item, result=outcome)


WAITING_EVENT = "task-waiting"
# Not task-succeeded: the expire task has not run (it does at the deadline, and then shows
# SUCCESS); not task-rejected or task-revoked either: Celery ranks those states below a custom
# one like WAITING, so Flower would keep showing WAITING.
SETTLED_EVENT = "task-settled"


def _call_repr(item: RunTool | Expire) -> str:
    tool = f"tool={item.tool} " if item.tool else ""
    return f"{tool}conversation={item.conversation_id} call={item.tool_call_id}"


def _announce(app: Celery, event: str, expire_task_id: str, item: Expire | Settled,
              **fields: str | None) -> None:
    """Mark the expire task of a pending call in Flower: WAITING while a person has the next
    move, SETTLED (with the call's outcome as its result) once it no longer waits.

    Celery's event state (which Flower keeps) takes a custom `task-<name>` event as the
    task's state `<NAME>`, one custom state replacing another; the task's own events later
    end it as SUCCESS. Display only: a lost event costs the label, never the call.
    """
    if not app.conf.worker_send_task_events:
        return
    current = app.current_worker_task
    hostname = current.request.hostname if current is not None else None
    try:
        with app.events.default_dispatcher(hostname=hostname) as dispatcher:
            dispatcher.send(event, uuid=expire_task_id, conversation_id=item.conversation_id,
                            tool_call_id=item.tool_call_id, **fields)
    except (OSError, OperationalError) as exc:
        log.warning("could not send %s for call %s: %s", event, item.tool_call_id, exc)
