"""RabbitMQ as the broker: quorum queues, topic exchanges, ETA tasks held in the broker."""
from __future__ import annotations

import kombu
import pytest
from amqp.exceptions import NotFound
from kombu.transport.native_delayed_delivery import MAX_LEVEL, level_name

from agentq.config import Config
from agentq.worker.factory import create_celery
from agentq.worker.queues import QUEUES, TIMERS
from agentq.worker.rabbitmq import Consumer, is_amqp
from tests.support.processes import wait_for
from tests.support.brokers import rabbitmqctl

DELAY_QUEUES = [level_name(n) for n in range(MAX_LEVEL + 1)]


def app_for(url: str):
    return create_celery(Config(broker_url=url, redis_url="embedded://rabbitmq"), runtime=lambda: None,
                         tool_queues={"render": "gpu"})


@pytest.mark.parametrize("url, amqp", [
    ("amqp://guest:guest@127.0.0.1:5672/agentq", True), ("amqps://h/v", True),
    ("pyamqp://h//", True), ("redis://127.0.0.1:6379/0", False), ("memory://", False),
])
def test_an_amqp_url_is_rabbitmq_and_nothing_else_is(url, amqp):
    assert is_amqp(url) is amqp


def test_on_rabbitmq_every_queue_is_a_quorum_queue_behind_a_topic_exchange():
    app = app_for("amqp://guest:guest@127.0.0.1:5672/agentq")
    queues = app.conf.task_queues
    assert [q.name for q in queues] == [*QUEUES, "gpu"]
    assert all(q.queue_arguments == {"x-queue-type": "quorum"} and q.exchange.type == "topic"
               for q in queues)
    assert app.conf.task_default_queue_type == "quorum"
    assert app.conf.worker_detect_quorum_queues is True  # per-consumer prefetch
    assert app.conf.worker_consumer == "agentq.worker.rabbitmq:Consumer"
    assert app.conf.broker_heartbeat == 4
    assert app.connection_for_write().transport.driver_type == "amqp"  # kombu's, not agentq's Redis one


def test_on_redis_the_queues_stay_as_they_were():
    app = app_for("redis://127.0.0.1:6379/0")
    assert all(q.queue_arguments is None and q.exchange.type == "direct" for q in app.conf.task_queues)
    assert app.conf.worker_consumer == "celery.worker.consumer:Consumer"
    assert app.conf.broker_heartbeat == 120


def test_agentqs_worker_consumer_binds_through_its_own_delayed_delivery_step():
    steps = Consumer.Blueprint.default_steps
    assert "agentq.worker.rabbitmq:DelayedDelivery" in steps
    assert not any(s.endswith("delayed_delivery:DelayedDelivery") and s.startswith("celery") for s in steps)


def delayed_messages(url: str) -> int | None:
    """Messages waiting in the delay queues; None while a worker has not declared them."""
    total = 0
    with kombu.Connection(url) as conn:
        for name in DELAY_QUEUES:
            channel = conn.channel()
            try:
                total += channel.queue_declare(name, passive=True).message_count
            except NotFound:
                return None
            finally:
                if channel.is_open:
                    channel.close()
    return total


@pytest.mark.worker
@pytest.mark.rabbitmq
@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.parametrize("broker_url", ["rabbitmq"], indirect=True)
def test_a_task_due_later_waits_in_rabbitmqs_delay_queues_not_in_a_worker(
        pg_store_clean, broker, broker_url, workers):
    worker = workers("timers", queues=TIMERS)  # declares the delay queues and binds every queue
    wait_for(lambda: delayed_messages(broker_url) is not None, timeout_s=60,
             what=f"the delay queues; worker log:\n{worker.log_text()}")
    before = delayed_messages(broker_url)
    broker.send_task("agentq.expire", args=["no-such-conversation", "no-such-call"], countdown=600)
    wait_for(lambda: delayed_messages(broker_url) == before + 1, what="the task in a delay queue")
    vhost = broker_url.rsplit("/", 1)[1]
    listed = rabbitmqctl("list_queues", "-p", vhost, "name", "type", "messages").stdout.split("\n")
    rows = {line.split("\t")[0]: line.split("\t")[1:] for line in listed if "\t" in line}
    assert rows[TIMERS][0] == "quorum" and rows["agentq.model"][0] == "quorum"  # declared by this worker
    assert rows[TIMERS][1] == "0"  # nothing for the worker to hold until it is due
    assert "Native delayed delivery will not be available" not in worker.log_text()
    assert "Failed to bind" not in worker.log_text()
