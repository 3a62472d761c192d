"""The broker transport: one Redis client per channel, kombu's semantics and URLs unchanged."""
from __future__ import annotations

import threading

import kombu
import pytest
import redis
from kombu import Exchange, Producer, Queue
from kombu.transport import memory, pyamqp, redis as kombu_redis

from agentq.worker import transport as agentq_broker

QUEUE = Queue("agentq.test-broker", Exchange("agentq.test-broker"), routing_key="agentq.test-broker")
FANOUT = Exchange("agentq.test-broker-fanout", type="fanout")


def counting_clients(channel: kombu_redis.Channel) -> list[redis.Redis]:
    """Every redis.Redis the channel builds from now on, in order."""
    built: list[redis.Redis] = []
    make = channel.Client

    def client(**kwargs: object) -> redis.Redis:
        built.append(make(**kwargs))
        return built[-1]

    channel.Client = client
    return built


@pytest.mark.redis
def test_a_channel_publishes_fans_out_and_acks_through_one_redis_client(broker, redis_url):
    peek = redis.Redis.from_url(redis_url)
    with broker.connection_for_write() as conn:
        channel = conn.channel()
        built = counting_clients(channel)
        producer = Producer(channel)
        for n in range(3):
            producer.publish({"n": n}, exchange=QUEUE.exchange, routing_key=QUEUE.routing_key,
                             declare=[QUEUE])
        producer.publish({"event": "e"}, exchange=FANOUT, declare=[FANOUT])
        received = []
        for _ in range(3):
            message = QUEUE(channel).get(no_ack=False)
            assert not peek.exists(channel.unacked_key)  # no copy kept (ack_emulation off)
            message.ack()
            received.append(message.payload["n"])
        channel.close()
    assert received == [0, 1, 2]
    assert len(built) == 1


@pytest.mark.redis
def test_the_tasks_an_app_sends_go_through_its_pool_on_agentqs_channel_and_one_client(
        broker, redis_url):
    """Celery sends every task through its connection pool, whose connections kombu builds
    from the URL's parts: they resolve to agentq's transport all the same."""
    peek = redis.Redis.from_url(redis_url)
    with broker.producer_or_acquire() as producer:
        assert isinstance(producer.connection, agentq_broker.Connection)
        assert isinstance(producer.channel, agentq_broker.Channel)
        built = counting_clients(producer.channel)
        for n in range(3):
            broker.send_task("agentq.test-broker-task", args=[n], queue=QUEUE, producer=producer)
    assert peek.llen(QUEUE.routing_key) == 3
    peek.delete(QUEUE.routing_key)
    assert len(built) <= 1  # kombu's own channel builds one per task


@pytest.mark.redis
def test_a_channel_with_kombus_ack_emulation_holds_a_task_until_acked_through_one_client(
        redis_url):
    """An operator who turns `ack_emulation` back on gets kombu's visibility bookkeeping."""
    peek = redis.Redis.from_url(redis_url)
    with agentq_broker.Connection(redis_url, transport_options={"ack_emulation": True}) as conn:
        channel = conn.channel()
        built = counting_clients(channel)
        Producer(channel).publish({"n": 1}, exchange=QUEUE.exchange,
                                  routing_key=QUEUE.routing_key, declare=[QUEUE])
        message = QUEUE(channel).get(no_ack=False)
        assert peek.hexists(channel.unacked_key, message.delivery_tag)  # held until acked
        message.ack()
        assert not peek.hexists(channel.unacked_key, message.delivery_tag)
        channel.close()
    assert len(built) == 1


@pytest.mark.redis
def test_a_task_taken_by_a_worker_that_stops_cleanly_is_put_back(broker):
    """With no copy in Redis, what a channel took and did not ack goes back when it closes
    (a worker's warm shutdown); only a killed worker's tasks are left to the sweeper."""
    with broker.connection_for_write() as conn:
        channel = conn.channel()
        Producer(channel).publish({"n": 7}, exchange=QUEUE.exchange,
                                  routing_key=QUEUE.routing_key, declare=[QUEUE])
        taken = QUEUE(channel).get(no_ack=False)
        assert taken.payload == {"n": 7}
        channel.close()
        other = conn.channel()
        again = QUEUE(other).get(no_ack=False)
        assert again is not None and again.payload == {"n": 7}
        again.ack()
        other.close()


@pytest.mark.redis
def test_a_channel_builds_a_new_client_on_the_pool_kombu_makes_after_a_fork(broker):
    with broker.connection_for_write() as conn:
        channel = conn.channel()
        built = counting_clients(channel)
        producer = Producer(channel)
        producer.publish({"n": 1}, exchange=QUEUE.exchange, routing_key=QUEUE.routing_key,
                         declare=[QUEUE])
        channel._after_fork()  # the hook kombu runs in a forked child: it drops the pool
        producer.publish({"n": 2}, exchange=QUEUE.exchange, routing_key=QUEUE.routing_key)
        assert [QUEUE(channel).get(no_ack=True).payload["n"] for _ in range(2)] == [1, 2]
        assert len(built) == 2
        assert built[1].connection_pool is channel.pool is not built[0].connection_pool
        channel.close()


@pytest.mark.parametrize("url, transport", [
    ("redis://127.0.0.1:6379/3", agentq_broker.Transport),
    ("rediss://cache.example:6380/0", agentq_broker.Transport),
    ("rediss://cache.example:6380/0?ssl_cert_reqs=required", agentq_broker.Transport),
    ("redis+socket:///run/redis.sock", agentq_broker.Transport),
    ("sentinel://127.0.0.1:26379", kombu_redis.SentinelTransport),
    ("memory://", memory.Transport),
    ("amqp://guest:guest@127.0.0.1:5672/agentq", pyamqp.Transport),  # RabbitMQ: kombu's own
])
def test_a_broker_url_reads_and_connects_as_with_kombu_and_only_redis_changes_transport(
        url, transport):
    ours, kombus = agentq_broker.Connection(url), kombu.Connection(url)
    assert ours.get_transport_cls() is transport
    assert (ours.as_uri(), ours.ssl, ours.info()) == (kombus.as_uri(), kombus.ssl, kombus.info())


@pytest.mark.redis
def test_more_senders_than_the_pool_has_connections_wait_for_one_instead_of_failing(broker):
    """kombu's pool raised MaxConnectionsError past its size, which Celery took for a lost
    broker; under gevent hundreds of tasks ack and publish at once."""
    senders, each = 12, 5
    with broker.connection_for_write() as conn:
        conn.transport_options["max_connections"] = 2
        channel = conn.channel()
        assert isinstance(channel.pool, redis.BlockingConnectionPool)
        Producer(channel).publish({}, exchange=QUEUE.exchange, routing_key=QUEUE.routing_key,
                                  declare=[QUEUE])
        QUEUE(channel).purge()
        failures: list[BaseException] = []
        start = threading.Barrier(senders)

        def send(n: int) -> None:
            start.wait()
            try:
                for i in range(each):
                    with channel.conn_or_acquire() as client:
                        client.blpop(["agentq.test-broker-nothing"], timeout=0.05)  # a slow reply
                        client.lpush(QUEUE.routing_key, f"{n}-{i}")
            except BaseException as exc:  # noqa: BLE001 - any failure is the finding
                failures.append(exc)

        threads = [threading.Thread(target=send, args=(n,)) for n in range(senders)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        with channel.conn_or_acquire() as client:
            sent = client.llen(QUEUE.routing_key)
            client.delete(QUEUE.routing_key)
        channel.close()
    assert failures == [] and sent == senders * each
