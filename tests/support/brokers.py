"""The two brokers the durability tests run on, and what a test does to lose a broker's tasks.

Redis is a db index claimed for the run (conftest's `redis_url`); RabbitMQ is a vhost made
for the run with `rabbitmqctl add_vhost` (conftest's `rabbitmq_url`). A test that takes the
`broker_url` fixture runs on Redis; one parametrized with `ON_EACH_BROKER` runs once on each.
"""
from __future__ import annotations

import secrets
import shutil
import subprocess

import kombu
import pytest
import redis
from amqp.exceptions import NotFound
from kombu.transport.native_delayed_delivery import MAX_LEVEL, level_name

from agentq.worker.queues import QUEUES
from agentq.worker.rabbitmq import is_amqp

RABBITMQ_SERVER = "amqp://guest:guest@127.0.0.1:5672"
REDIS_CLAIM = "agentq:test-claim"
# Every queue a flush empties on RabbitMQ: agentq's and the delayed-delivery levels, which
# hold the ETA tasks there (tests/tools_for_tests has one tool with a queue of its own).
FLUSHED_QUEUES = (*QUEUES, "agentq.tests.own", *(level_name(n) for n in range(MAX_LEVEL + 1)))

ON_EACH_BROKER = pytest.mark.parametrize(
    "broker_url", ["redis", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)], indirect=True)


def rabbitmqctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["rabbitmqctl", "-q", *args], capture_output=True, text=True, timeout=60)


def add_vhost() -> str:
    """A new vhost on the local RabbitMQ that guest may use; raises OSError when it cannot."""
    if shutil.which("rabbitmqctl") is None:
        raise OSError("rabbitmqctl is not installed")
    name = f"agentq_test_{secrets.token_hex(6)}"
    for command in (("add_vhost", name), ("set_permissions", "-p", name, "guest", ".*", ".*", ".*")):
        done = rabbitmqctl(*command)
        if done.returncode != 0:
            raise OSError(f"rabbitmqctl {command[0]}: {(done.stderr or done.stdout).strip()}")
    return name


def delete_vhost(name: str) -> None:
    rabbitmqctl("delete_vhost", name)


def flush_broker(broker_url: str) -> None:
    """Lose every queued, unacknowledged and delayed task, as a broker that lost its data."""
    if is_amqp(broker_url):
        # A deleted queue takes its unacknowledged messages along; workers declare their
        # queues again (and their delayed-delivery bindings) when they start.
        with kombu.Connection(broker_url) as conn:
            for name in FLUSHED_QUEUES:
                channel = conn.channel()
                try:
                    channel.queue_delete(name)
                except NotFound:
                    pass  # a not-found error closes the channel: a new one for the next
                finally:
                    if channel.is_open:
                        channel.close()
        return
    client = redis.Redis.from_url(broker_url)
    client.flushdb()
    client.set(REDIS_CLAIM, "flushed", ex=7200)  # keep this db claimed for the run
    client.close()
