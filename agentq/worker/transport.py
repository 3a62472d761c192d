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
import kombu.connection
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

    Its pool's connections are of this class too. kombu's pool builds each as its own
    `PooledConnection` from the URL's parts, which resolves the scheme to kombu's transport:
    Celery sends every task through that pool (`app.pool`), so without this the next
    step's send went through kombu's channel, a new client for each.
    """

    def get_transport_cls(self) -> type:
        if self.transport_cls in REDIS_SCHEMES:
            return Transport
        return super().get_transport_cls()

    def Pool(self, limit: int | None = None, **kwargs: object) -> ConnectionPool:  # noqa: N802 - kombu's name
        return ConnectionPool(self, limit=limit, **kwargs)


class PooledConnection(kombu.connection.PooledConnection, Connection):
    """kombu's pooled connection (closed and replaced after an error), resolved as ours."""


class ConnectionPool(kombu.connection.ConnectionPool):
    """kombu's connection pool, whose connections resolve their transport as `Connection`."""

    def new(self) -> PooledConnection:
        return PooledConnection(self, **dict(self.connection._info(resolve=False)))
