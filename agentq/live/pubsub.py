"""Live notifications for streams: deltas, retries and "new events", over Redis pub/sub.

The log in the database is the record; pub/sub only tells a listening stream that there
is something to send. Embedded mode uses an in-process Redis (fakeredis) so the same
code path runs with no server.
"""
from __future__ import annotations

import json
import threading
from typing import Any

import fakeredis
import redis

from agentq.config import EMBEDDED_PUBSUB
from agentq.live.fanout import Fanout, Feed, FeedEnded, Notice

__all__ = ["Feed", "FeedEnded", "Notice", "PubSub", "channel"]

_EMBEDDED_SERVERS: dict[str, fakeredis.FakeServer] = {}
_EMBEDDED_LOCK = threading.Lock()


def _embedded_client(url: str) -> redis.Redis:
    # One in-process server per URL, so every component of one process shares it.
    with _EMBEDDED_LOCK:
        server = _EMBEDDED_SERVERS.setdefault(url, fakeredis.FakeServer())
    return fakeredis.FakeRedis(server=server)


MAX_CONNECTIONS = 10_000
FEED_CAPACITY = 1000
_FANOUT_LOCK = threading.Lock()


def channel(conversation_id: str) -> str:
    return f"agentq:conversation:{conversation_id}"


PARTIAL_TTL_S = 3600


def _partial_key(round_id: str) -> str:
    """The text a round's newest attempt has streamed so far."""
    return f"agentq:partial:{round_id}"


def _closed_key(round_id: str) -> str:
    """Set once the round was interrupted: no delta of it is published after that."""
    return f"agentq:partial:{round_id}:closed"


class PubSub:
    """Publish and subscribe per conversation; publishing never raises into a step."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._fanout: Fanout | None = None
        if url.startswith(EMBEDDED_PUBSUB):
            self.client = _embedded_client(url)
        else:
            # Publishing threads each take a connection; live streams share one (the fanout).
            self.client = redis.Redis.from_url(
                url, socket_timeout=5, socket_connect_timeout=5, max_connections=MAX_CONNECTIONS
            )

    def publish(self, conversation_id: str, kind: str, data: dict[str, Any]) -> bool:
        """Best effort: a lost notice costs a stream some latency, never a lost event.

        False when nothing was sent: Redis failed, or the delta's round was interrupted.
        """
        payload = json.dumps({"kind": kind, "data": data}, separators=(",", ":"))
        try:
            if kind == "delta" and not self._keep_partial(data):
                return False
            self.client.publish(channel(conversation_id), payload)
        except redis.RedisError:
            return False
        return True

    def _keep_partial(self, data: dict[str, Any]) -> bool:
        """Add a delta to its round's text; False (publish nothing) if the round is closed.

        Careful: the check and the append are one transaction, and `close_round` reads the
        text in one too, so a delta is either in the text an interrupt keeps or never
        published. The first delta of an attempt (index 0) starts the text afresh.
        """
        round_id = data["round_id"]
        pipe = self.client.pipeline(transaction=True)
        pipe.exists(_closed_key(round_id))
        if data.get("index") == 0:
            pipe.set(_partial_key(round_id), data["text"].encode("utf-8"), ex=PARTIAL_TTL_S)
        else:
            pipe.append(_partial_key(round_id), data["text"].encode("utf-8"))
            pipe.expire(_partial_key(round_id), PARTIAL_TTL_S)
        closed = pipe.execute()[0]
        return not closed

    def close_round(self, round_id: str) -> str:
        """Stop the round's deltas and return the text streamed so far ("" if unknown).

        An interrupt keeps this text in the log; no later delta of the round reaches a
        stream, so a person never sees text that the log and the next request lack.
        """
        try:
            pipe = self.client.pipeline(transaction=True)
            pipe.set(_closed_key(round_id), 1, ex=PARTIAL_TTL_S)
            pipe.get(_partial_key(round_id))
            text = pipe.execute()[1]
        except redis.RedisError:
            return ""
        return "" if text is None else text.decode("utf-8", errors="replace")

    @property
    def fanout(self) -> Fanout:
        """This process's one subscription for all its live streams, made at first use."""
        with _FANOUT_LOCK:
            if self._fanout is None:
                self._fanout = Fanout(self.client)
            return self._fanout

    def subscribe(self, conversation_id: str, *, timeout_s: float = 1.0,
                  capacity: int = FEED_CAPACITY) -> Feed:
        """A feed of the conversation's notices, subscribed when this returns; close it after."""
        return self.fanout.open(channel(conversation_id), capacity=capacity, timeout_s=timeout_s)
