"""Batched task events: a flush sends every event, those sent while it publishes included."""
from __future__ import annotations

import sys
from types import SimpleNamespace

from celery import Celery

from agentq.worker.task_events import BatchedTaskEvents


def test_an_event_sent_while_a_batch_is_published_goes_out_with_the_next_batch():
    app = Celery("events", broker="memory://")
    with app.connection_for_write() as conn:
        dispatcher = app.events.Dispatcher(conn, enabled=True, buffer_group=["task"],
                                           buffer_limit=sys.maxsize)
        published: list[list[str]] = []
        publish = dispatcher.producer.publish

        def publish_while_a_task_sends(body, **kwargs):
            if not published:  # a green thread switches during the round trip: a task sends
                dispatcher.send("task-succeeded", uuid="first")
            published.append([event["type"] for event in body])
            return publish(body, **kwargs)

        dispatcher.producer.publish = publish_while_a_task_sends
        consumer = SimpleNamespace(event_dispatcher=dispatcher)
        dispatcher.send("task-received", uuid="first")
        dispatcher.send("task-started", uuid="first")
        BatchedTaskEvents._flush(consumer)
        BatchedTaskEvents._flush(consumer)
        BatchedTaskEvents._flush(consumer)  # nothing left: no empty batch either
        dispatcher.close()
    assert published == [["task-received", "task-started"], ["task-succeeded"]]
