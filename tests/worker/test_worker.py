"""The runtime through a real Celery worker process on the real Redis broker and Postgres."""
from __future__ import annotations

import socket
import time
import uuid

import pytest
from celery.events.event import get_exchange
from kombu import Queue

from agentq.core.scope import Scope
from agentq.worker.tasks import enqueue
from tests.support.processes import wait_for
from tests.support.brokers import ON_EACH_BROKER

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

SCOPE = Scope(tenant="t1", user="u1")


@ON_EACH_BROKER
def test_a_turn_with_a_server_tool_completes_on_a_real_worker(pg_store_clean, commands, broker, workers):
    store = pg_store_clean
    conv = commands.create_conversation(SCOPE, {"script": [
        {"text": "Checking.", "tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}],
         "chunks": 3},
        {"text": "Cold.", "chunks": 2},
    ]})
    worker = workers("w1")
    _, follow = commands.post_message(conv.id, "weather?", SCOPE)
    enqueue(broker, follow)
    wait_for(lambda: store.conversations.load(conv.id).fsm.rounds == 2
             and store.conversations.load(conv.id).fsm.state == "idle",
             timeout_s=60, what=f"the turn to finish; worker log:\n{worker.log_text()}")
    events = store.log.list_events(conv.id)
    assert [e.type for e in events] == [
        "user_msg", "assistant_msg", "tool_call", "tool_result", "assistant_msg"
    ]
    rounds = [e.round_id for e in events if e.type == "assistant_msg"]
    assert len(set(rounds)) == 2
    assert events[2].round_id == rounds[0]
    assert {s.status for s in store.steps.list_of(conv.id)} == {"succeeded"}


def test_compaction_runs_as_its_own_agentq_compact_task_on_a_real_worker(
        pg_store_clean, commands, broker, workers):
    from agentq.core.keys import task_id

    store = pg_store_clean
    conv = commands.create_conversation(SCOPE, {
        "tools": [], "compaction": {"max_context_tokens": 64, "min_keep_turns": 1},
    })
    worker = workers("w1")
    for turn in range(6):  # each answer echoes its question: the context passes 64 tokens
        _, follow = commands.post_message(conv.id, f"question number {turn}, " * 4, SCOPE)
        enqueue(broker, follow)
        wait_for(lambda: store.conversations.load(conv.id).fsm.rounds == turn + 1
                 and store.conversations.load(conv.id).fsm.state == "idle",
                 timeout_s=60, what=f"turn {turn}; worker log:\n{worker.log_text()}")
    compacts = [s for s in store.steps.list_of(conv.id) if s.kind == "compact"]
    summaries = store.log.list_summaries(conv.id)
    assert compacts and len(compacts) == len(summaries)
    assert {s.status for s in compacts} == {"succeeded"}
    # each ran in the agentq.compact task sent for it (uuid5 of its step key), not inside
    # an advance, whose task id the row would name otherwise
    assert all(s.celery_task_id == task_id(s.step_key) for s in compacts)
    assert [s.to_seq for s in summaries] == sorted(s.ref["to_seq"] for s in compacts)


def test_a_step_task_sends_its_follow_ups_before_it_publishes_its_notices(tmp_path):
    """The next step's task goes out first: a notice (a Redis round trip) must not delay it."""
    from agentq.commands import Commands
    from agentq.config import Config
    from agentq.live.pubsub import PubSub
    from agentq.runtime import Runtime
    from agentq.store import Store
    from agentq.tools import Registry
    from agentq.worker.factory import create_celery

    order: list[str] = []

    class Recording(PubSub):
        def publish(self, conversation_id, kind, data):
            order.append(f"notice:{kind}")
            return super().publish(conversation_id, kind, data)

    store = Store.open(f"sqlite:///{tmp_path}/worker.db")
    store.migrate()
    registry = Registry.from_modules(["agentq.tools.demo"])
    runtime = Runtime(store=store, registry=registry, pubsub=Recording("embedded://order"),
                      config=Config())
    app = create_celery(Config(broker_url="memory://", redis_url="embedded://order"),
                        runtime=lambda: runtime)
    app.send_task = lambda name, **_: order.append(f"task:{name}")
    commands = Commands(store, registry)
    script = [{"tool_calls": [{"name": "noop", "args": {}}]}, {"text": "done"}]
    cid = commands.create_conversation(SCOPE, {"script": script}).id
    commands.post_message(cid, "go", SCOPE)
    app.tasks["agentq.advance"](cid)  # the model step: it asks for its tool call
    assert order == ["task:agentq.run_tool", "notice:events"]
    store.dispose()


def test_celeryconfig_holds_the_same_values_the_runtime_builds_in():
    """docs/configuration.md's promise: running without celeryconfig.py changes nothing."""
    import celeryconfig

    from agentq.worker.factory import CELERY_DEFAULTS

    written = {k: v for k, v in vars(celeryconfig).items() if not k.startswith("_") and k.islower()}
    assert written == {k: v for k, v in CELERY_DEFAULTS.items() if k in written}
    assert written["task_send_sent_event"] is False and written["worker_send_task_events"] is True


# queues: a worker per kind of work, or one for all


def idle_after(store, cid: str, *, rounds: int) -> bool:
    """The conversation's turn is over after `rounds` model rounds."""
    fsm = store.conversations.load(cid).fsm
    return fsm.state == "idle" and fsm.rounds == rounds


def test_each_task_goes_to_the_queue_of_its_kind_and_a_tool_to_its_own_if_it_names_one():
    from agentq.config import Config
    from agentq.followups import Advance, Compact, Expire, RunTool
    from agentq.worker.factory import create_celery

    app = create_celery(Config(broker_url="memory://", redis_url="embedded://queues"),
                        runtime=lambda: None, tool_queues={"render": "gpu"})
    routed: dict[str, str] = {}

    def send_task(name, **options):
        queue = app.amqp.router.route(dict(options), name)["queue"].name
        routed[options.get("argsrepr") or name] = queue

    app.send_task = send_task
    enqueue(app, [Advance("c"), Compact("c", 3, "k0"), RunTool("c", "weather", "k1", tool="get_weather"),
                  RunTool("c", "scene", "k2", tool="render"), Expire("c", "ask", "k3", None)],
            tool_queues={"render": "gpu"})
    for beat_task in ("agentq.sweep", "agentq.gc"):
        app.send_task(beat_task)
    assert routed == {
        "conversation=c": "agentq.model",
        "conversation=c to_seq=3": "agentq.model",
        "tool=get_weather conversation=c call=weather": "agentq.tools",
        "tool=render conversation=c call=scene": "gpu",
        "conversation=c call=ask": "agentq.timers",
        "agentq.sweep": "agentq.timers",
        "agentq.gc": "agentq.timers",
    }
    # a worker started without -Q takes every one of them
    assert [q.name for q in app.conf.task_queues] == [
        "agentq.model", "agentq.tools", "agentq.timers", "agentq.webhooks", "gpu"]


def test_a_worker_started_without_queues_runs_a_tool_that_has_a_queue_of_its_own(
        pg_store_clean, commands, broker, workers):
    store = pg_store_clean
    conv = commands.create_conversation(SCOPE, {"script": [
        {"tool_calls": [{"name": "own_queue_lookup", "args": {"key": "k"}}]}, {"text": "found"}]})
    worker = workers("w1")
    enqueue(broker, commands.post_message(conv.id, "look it up", SCOPE)[1])
    wait_for(lambda: idle_after(store, conv.id, rounds=2),
             timeout_s=60, what=f"the turn; worker log:\n{worker.log_text()}")
    [result] = [e for e in store.log.list_events(conv.id) if e.type == "tool_result"]
    assert result.content["output"] == "own value of k"


def test_a_slow_tool_holds_no_worker_of_model_calls_or_deadlines(
        pg_store_clean, commands, broker, workers):
    store = pg_store_clean
    tool_worker = workers("tools", concurrency=1, queues="agentq.tools")
    model_worker = workers("model", concurrency=1, queues="agentq.model,agentq.timers")
    slow = commands.create_conversation(SCOPE, {"script": [
        {"tool_calls": [{"name": "sleep", "args": {"seconds": 60}}]}, {"text": "slept"}]})
    enqueue(broker, commands.post_message(slow.id, "sleep", SCOPE)[1])
    logs = lambda: f"tools:\n{tool_worker.log_text()}\nmodel:\n{model_worker.log_text()}"  # noqa: E731
    wait_for(lambda: [s.status for s in store.steps.list_of(slow.id) if s.kind == "tool"] == ["running"],
             timeout_s=60, what=f"the slow tool to start; {logs()}")
    # the only tool worker sleeps: a model turn and a person's deadline still come through
    quick = commands.create_conversation(SCOPE, {"script": [
        {"tool_calls": [{"name": "quick_approve", "args": {"amount": 1}}]}, {"text": "expired"}]})
    enqueue(broker, commands.post_message(quick.id, "approve?", SCOPE)[1])
    wait_for(lambda: idle_after(store, quick.id, rounds=2),
             timeout_s=30, what=f"the other turn, past its call's deadline; {logs()}")
    [result] = [e for e in store.log.list_events(quick.id) if e.type == "tool_result"]
    assert result.content["status"] == "expired"
    assert [s.status for s in store.steps.list_of(slow.id) if s.kind == "tool"] == ["running"]


# task events: Flower's tasks page is built from them


def task_event_messages(app, start, until, *, timeout_s: float = 60.0) -> list:
    """Bodies of the broker messages on the event exchange from `start()` until `until()`
    holds, and a second after (a batch goes out at most half a second late)."""
    seen: list = []

    def drain() -> None:
        try:
            conn.drain_events(timeout=0.2)
        except socket.timeout:
            pass

    with app.connection_for_read() as conn, conn.Consumer(
            Queue(f"test-events-{uuid.uuid4().hex}", get_exchange(conn, app.conf.event_exchange),
                  routing_key="task.#", auto_delete=True, durable=False),
            callbacks=[lambda body, _message: seen.append(body)], accept=["json"]):
        drain()  # subscribed from here on
        start()
        deadline, done_at = time.monotonic() + timeout_s, None
        while time.monotonic() < (done_at or deadline):
            drain()
            if done_at is None and until():
                done_at = time.monotonic() + 1.0
    return seen


@pytest.mark.parametrize("pool", ["gevent", "threads"])
def test_a_worker_sends_every_task_event_but_in_batches_on_pools_without_an_event_loop(
        pg_store_clean, commands, broker, workers, pool):
    store = pg_store_clean
    conv = commands.create_conversation(SCOPE, {"script": [
        {"tool_calls": [{"name": "noop", "args": {}}]}, {"text": "done"}]})
    workers("w1", pool=pool)
    wait_for(lambda: broker.control.ping(timeout=0.5), timeout_s=60, what="the worker to start")
    bodies = task_event_messages(
        broker, lambda: enqueue(broker, commands.post_message(conv.id, "go", SCOPE)[1]),
        lambda: idle_after(store, conv.id, rounds=2))
    events = [e for body in bodies for e in (body if isinstance(body, list) else [body])]
    steps = store.steps.list_of(conv.id)
    by_task = {s.celery_task_id: {e["type"] for e in events if e.get("uuid") == s.celery_task_id}
               for s in steps}
    # Flower learns of each step's task being received, started and finished...
    assert len(steps) == 3 and all(
        {"task-received", "task-started", "task-succeeded"} <= types for types in by_task.values())
    # ...from fewer broker messages than events: a batch is one message
    assert len(bodies) < len(events)
