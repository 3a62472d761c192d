"""kombu's Redis transport with one redis-py client per channel, for agentq's Celery app.

kombu's Redis channel builds a new `redis.Redis` around its connection pool for every
publish, ack, task event and QoS pipeline (`Channel.conn_or_acquire`). The pool keeps the
connections; only the client is rebuilt, and building one (a table of response callbacks,
an event dispatcher) took about 6% of a green worker's CPU. A client that holds no
connection of its own is safe to share between threads and greenlets: each command checks
a connection out of the pool, and pipelines, locks and pub/sub are made per use.

The pool a channel sends its commands through waits for a free connection instead of
failing: kombu's raises `MaxConnectionsError` past its 10 connections, which a green
worker with hundreds of tasks acking and publishing at once reached, and Celery took the
failed ack for a lost broker, dropped its connection and left the unacked tasks to come
back only after the visibility timeout.
"""
from __future__ import annotations

import kombu
import redis
from kombu.transport import redis as kombu_redis

REDIS_SCHEMES = frozenset({"redis", "rediss"})
# How long a command waits for one of the pool's connections before it fails as lost.
POOL_WAIT_S = 30.0


class Channel(kombu_redis.Channel):
    """kombu's Redis channel, sending its commands through one client while its pool lasts."""

    _commands_client = None

    def _create_client(self, asynchronous=False):
        if asynchronous:  # the BRPOP and pub/sub clients: kombu keeps each, with its connection
            return super()._create_client(asynchronous=True)
        client = self._commands_client
        # kombu drops its pool on a fork, a lost connection or close: a new pool, a new client.
        if client is None or client.connection_pool is not self.pool:
            client = self._commands_client = super()._create_client()
        return client

    def _get_pool(self, asynchronous=False):
        if asynchronous:  # one connection each for BRPOP and pub/sub: kombu's own
            return super()._get_pool(asynchronous=True)
        params = self._connparams(asynchronous=False)
        self.keyprefix_fanout = self.keyprefix_fanout.format(db=params["db"])  # as kombu's
        return redis.BlockingConnectionPool(timeout=POOL_WAIT_S, **params)


class Transport(kombu_redis.Transport):
    Channel = Channel


class Connection(kombu.Connection):
    """A kombu Connection that takes redis:// and rediss:// through `Transport`.

    Only the class it resolves changes. The transport stays named by the URL's scheme, so
    `as_uri()` reads as before (Flower picks its broker client by that scheme), rediss://
    keeps kombu's SSL defaults, and other schemes (sentinel://, memory://) are kombu's own.
    """

    def get_transport_cls(self) -> type:
        if self.transport_cls in REDIS_SCHEMES:
            return Transport
        return super().get_transport_cls()
