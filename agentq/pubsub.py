"""Live notifications for streams: deltas, retries and "new events", over Redis pub/sub.

The log in the database is the record; pub/sub only tells a listening stream that there
is something to send. Embedded mode uses an in-process Redis (fakeredis) so the same
code path runs with no server.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any, Iterator

import fakeredis
import redis

from agentq.config import EMBEDDED_PUBSUB

_EMBEDDED_SERVERS: dict[str, fakeredis.FakeServer] = {}
_EMBEDDED_LOCK = threading.Lock()


def _embedded_client(url: str) -> redis.Redis:
    # One in-process server per URL, so every component of one process shares it.
    with _EMBEDDED_LOCK:
        server = _EMBEDDED_SERVERS.setdefault(url, fakeredis.FakeServer())
    return fakeredis.FakeRedis(server=server)


MAX_CONNECTIONS = 10_000


def channel(conversation_id: str) -> str:
    return f"agentq:conversation:{conversation_id}"


PARTIAL_TTL_S = 3600


def _partial_key(round_id: str, attempt: int | None = None) -> str:
    base = f"agentq:partial:{round_id}"
    return base if attempt is None else f"{base}:{attempt}"


def _keep_partial(pipe: Any, round_id: str, attempt: int, text: str) -> None:
    pipe.set(_partial_key(round_id), attempt, ex=PARTIAL_TTL_S)
    pipe.append(_partial_key(round_id, attempt), text.encode("utf-8"))
    pipe.expire(_partial_key(round_id, attempt), PARTIAL_TTL_S)


@dataclass(frozen=True)
class Notice:
    """One live message: `kind` is "delta", "retry" or "events"."""

    kind: str
    data: dict[str, Any]


class PubSub:
    """Publish and subscribe per conversation; publishing never raises into a step."""

    def __init__(self, url: str) -> None:
        self.url = url
        if url.startswith(EMBEDDED_PUBSUB):
            self.client = _embedded_client(url)
        else:
            # Each live stream holds a connection for its subscription: redis-py's default
            # pool of 100 would cap an API process at about 100 streams.
            self.client = redis.Redis.from_url(
                url, socket_timeout=5, socket_connect_timeout=5, max_connections=MAX_CONNECTIONS
            )

    def publish(self, conversation_id: str, kind: str, data: dict[str, Any]) -> bool:
        """Best effort: a lost notice costs a stream some latency, never a lost event.

        A delta's text is also kept per round and attempt for a while, so an interrupt
        can keep what the person already saw of the answer.
        """
        payload = json.dumps({"kind": kind, "data": data}, separators=(",", ":"))
        try:
            pipe = self.client.pipeline(transaction=False)
            if kind == "delta":
                _keep_partial(pipe, data["round_id"], data["attempt"], data["text"])
            pipe.publish(channel(conversation_id), payload)
            pipe.execute()
        except redis.RedisError:
            return False
        return True

    def partial_text(self, round_id: str) -> str:
        """The text streamed so far by the newest attempt of a round ("" if unknown)."""
        try:
            attempt = self.client.get(_partial_key(round_id))
            if attempt is None:
                return ""
            text = self.client.get(_partial_key(round_id, int(attempt)))
        except redis.RedisError:
            return ""
        return "" if text is None else text.decode("utf-8", errors="replace")

    def subscribe(self, conversation_id: str, *, timeout_s: float = 1.0) -> Subscription:
        pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(channel(conversation_id))
        return Subscription(pubsub, timeout_s)


class Subscription:
    """Iterates notices; yields None every `timeout_s` without one (for keep-alives)."""

    def __init__(self, pubsub: Any, timeout_s: float) -> None:
        self._pubsub = pubsub
        self._timeout_s = timeout_s

    def __iter__(self) -> Iterator[Notice | None]:
        while True:
            message = self._pubsub.get_message(timeout=self._timeout_s)
            if message is None:
                yield None
                continue
            body = json.loads(message["data"])
            yield Notice(body["kind"], body["data"])

    def close(self) -> None:
        self._pubsub.close()
