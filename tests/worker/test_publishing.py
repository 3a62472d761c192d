"""Sending agentq's tasks: each queue declared on a broker channel's first send there, the
app's routes kept, and every task delivered (agentq.worker.publishing)."""
from __future__ import annotations

import threading
from typing import Any

import pytest
from kombu import Exchange, Queue

from agentq.config import Config
from agentq.followups import Advance, RunTool
from agentq.worker.factory import create_celery
from agentq.worker.queues import MODEL, TOOLS
from agentq.worker.tasks import enqueue


@pytest.fixture
def app(monkeypatch):
    app = create_celery(Config(database_url="sqlite://", redis_url="embedded://publishing"),
                        runtime=lambda: None, tool_queues={"slow_tool": "slow"})
    declares: list[tuple[str, Any]] = []
    send_task = app.send_task

    def recorded(name: str, **options: Any) -> Any:
        declares.append((options["queue"].name, options.get("declare")))
        return send_task(name, **options)

    monkeypatch.setattr(app, "send_task", recorded)
    app.declares = declares
    _lose_the_connection(app)  # the embedded broker's channel is the process's: start afresh
    yield app
    app.close()


def _lose_the_connection(app) -> Any:
    """Close the producer's broker connection, as a broker restart would; its channel."""
    with app.producer_or_acquire() as producer:
        lost = producer.channel
        producer.connection.close()
    return lost


def _waiting(app, queue: str) -> list[Any]:
    with app.connection_for_write() as conn:  # a consumer, as a worker's
        simple = conn.SimpleQueue(Queue(queue, Exchange(queue), routing_key=queue))
        bodies = []
        while True:
            try:
                message = simple.get(block=False)
            except simple.Empty:
                return bodies
            bodies.append(message.headers["argsrepr"])
            message.ack()


def test_a_queue_is_declared_on_its_first_send_on_a_channel_and_every_task_arrives(app):
    tool_queues = {"slow_tool": "slow"}
    enqueue(app, [Advance("c1"), Advance("c2")])
    enqueue(app, [RunTool("c1", "call-1", "tool-c1-call-1", "slow_tool"), Advance("c3")],
            tool_queues=tool_queues)
    enqueue(app, [RunTool("c2", "call-2", "tool-c2-call-2", None)], tool_queues=tool_queues)
    assert app.declares == [
        (MODEL, None), (MODEL, []),   # the first send declares the model queue, the next not
        ("slow", None), (MODEL, []),  # a tool's own queue, once
        (TOOLS, None),
    ]
    assert _waiting(app, MODEL) == ["conversation=c1", "conversation=c2", "conversation=c3"]
    assert _waiting(app, "slow") == ["tool=slow_tool conversation=c1 call=call-1"]
    assert _waiting(app, TOOLS) == ["conversation=c2 call=call-2"]


def test_a_channel_opened_after_the_connection_was_lost_declares_again(app):
    enqueue(app, [Advance("c1")])
    enqueue(app, [Advance("c2")])
    lost = _lose_the_connection(app)
    enqueue(app, [Advance("c3")])
    with app.producer_or_acquire() as producer:
        assert producer.channel is not lost
    assert app.declares == [(MODEL, None), (MODEL, []), (MODEL, None)]
    assert _waiting(app, MODEL) == ["conversation=c1", "conversation=c2", "conversation=c3"]


def test_an_operators_route_still_decides_the_queue(app):
    app.conf.task_routes = {"agentq.advance": {"queue": TOOLS}}
    app.amqp.router = app.amqp.Router()
    enqueue(app, [Advance("c1")])
    assert app.declares == [(TOOLS, None)]
    assert _waiting(app, TOOLS) == ["conversation=c1"]


def test_no_producer_is_taken_for_nothing_to_send(app, monkeypatch):
    monkeypatch.setattr(app, "producer_or_acquire", lambda *a, **k: pytest.fail("acquired"))
    enqueue(app, [])
    assert app.declares == []


def test_every_send_names_the_apps_reply_address_and_no_keyword_arguments(app):
    from celery.utils.saferepr import saferepr

    sent_from = [threading.Thread(target=enqueue, args=(app, [Advance(f"c{i}")]))
                 for i in range(2)]
    for thread in sent_from:
        thread.start()
        thread.join()
    with app.connection_for_write() as conn:
        simple = conn.SimpleQueue(Queue(MODEL, Exchange(MODEL), routing_key=MODEL))
        messages = [simple.get(block=False) for _ in sent_from]
    assert app.thread_oid != app.oid  # what Celery would name: the sending thread's
    for message in messages:
        assert message.properties["reply_to"] == app.oid  # the same from every thread
        assert message.headers["kwargsrepr"] == saferepr({})  # as Celery would show it
        message.ack()
