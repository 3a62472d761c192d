"""kombu's Redis transport with one redis-py client per channel, for agentq's Celery app.

kombu's Redis channel builds a new `redis.Redis` around its connection pool for every
publish, ack, task event and QoS pipeline (`Channel.conn_or_acquire`). The pool keeps the
connections; only the client is rebuilt, and building one (a table of response callbacks,
an event dispatcher) took about 6% of a green worker's CPU. A client that holds no
connection of its own is safe to share between threads and greenlets: each command checks
a connection out of the pool, and pipelines, locks and pub/sub are made per use.
"""
from __future__ import annotations

import kombu
from kombu.transport import redis as kombu_redis

REDIS_SCHEMES = frozenset({"redis", "rediss"})


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
