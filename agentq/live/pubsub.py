"""Live notifications for streams: deltas, retries and "new events", over Redis pub/sub.

The log in the database is the record; pub/sub only tells a listening stream that there
is something to send. Embedded mode uses an in-process Redis (fakeredis) so the same
code path runs with no server.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

import fakeredis
import redis

from agentq.config import EMBEDDED_PUBSUB
from agentq.live.delta_batches import DeltaBatches
from agentq.live.fanout import Fanout, Feed, FeedEnded, Notice

__all__ = ["Feed", "FeedEnded", "Notice", "Partial", "PubSub", "channel"]

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


def _mark_key(round_id: str) -> str:
    """`attempt:index` of the last delta in the round's text."""
    return f"agentq:partial:{round_id}:mark"


def _turn_round_key(turn_id: str) -> str:
    """The round of the turn that streamed last: where a stream joining the turn reads."""
    return f"agentq:partial:turn:{turn_id}"


@dataclass(frozen=True)
class Partial:
    """The text a round's newest attempt streamed so far: its deltas 0 to `index`."""

    round_id: str
    attempt: int
    index: int
    text: str


def _closed_key(round_id: str) -> str:
    """Set once the round was interrupted: no delta of it is published after that."""
    return f"agentq:partial:{round_id}:closed"


# A delta, in one round trip and atomically: refused if its round is closed, else added to
# the round's text (afresh for an attempt's first delta, which also names the round as its
# turn's newest), its mark moved to it, and published. Being atomic, a delta is either in the
# text an interrupt keeps and published, or neither; no close can come between the append and
# the publish; and a stream joining the turn reads a text and mark that match what was sent.
# KEYS: closed, partial, mark, turn's round. ARGV: text, ttl s, "1" to start afresh, channel,
# payload, mark ("attempt:index"), round id, "1" if the delta names its turn.
_DELTA_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if ARGV[3] == '1' then
  redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2])
  if ARGV[8] == '1' then redis.call('SET', KEYS[4], ARGV[7], 'EX', ARGV[2]) end
else
  redis.call('APPEND', KEYS[2], ARGV[1])
  redis.call('EXPIRE', KEYS[2], ARGV[2])
end
redis.call('SET', KEYS[3], ARGV[6], 'EX', ARGV[2])
redis.call('PUBLISH', ARGV[4], ARGV[5])
return 1
"""

class PubSub:
    """Publish and subscribe per conversation; publishing never raises into a step."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._fanout: Fanout | None = None
        self._deltas: DeltaBatches | None = None
        if url.startswith(EMBEDDED_PUBSUB):
            # fakeredis runs no Lua without an extra native package: in one process a delta
            # takes the transaction and the publish (`_publish_delta_in_two`).
            self.client = _embedded_client(url)
        else:
            # Publishing threads each take a connection; live streams share one (the fanout).
            self.client = redis.Redis.from_url(
                url, socket_timeout=5, socket_connect_timeout=5, max_connections=MAX_CONNECTIONS
            )
            self._deltas = DeltaBatches(self.client, self.client.register_script(_DELTA_SCRIPT))

    def publish(self, conversation_id: str, kind: str, data: dict[str, Any]) -> bool:
        """Best effort: a lost notice costs a stream some latency, never a lost event.

        False when nothing was sent: Redis failed, or the delta's round was interrupted.
        """
        payload = json.dumps({"kind": kind, "data": data}, separators=(",", ":"))
        try:
            if kind == "delta":
                return self._publish_delta(conversation_id, data, payload)
            self.client.publish(channel(conversation_id), payload)
        except redis.RedisError:
            return False
        return True

    def _publish_delta(self, conversation_id: str, data: dict[str, Any], payload: str) -> bool:
        """Keep the delta in its round's text and publish it, one round trip (shared with the
        process's other deltas sent at the same moment); False (nothing kept, nothing
        published) if the round is closed. The first delta of an attempt (index 0) starts
        the text afresh."""
        if self._deltas is None:
            return self._publish_delta_in_two(conversation_id, data, payload)
        round_id = data["round_id"]
        turn_id = data.get("turn_id") or ""
        done = self._deltas.call(
            keys=[_closed_key(round_id), _partial_key(round_id), _mark_key(round_id),
                  _turn_round_key(turn_id)],
            args=[data["text"].encode("utf-8"), PARTIAL_TTL_S,
                  "1" if data.get("index") == 0 else "0", channel(conversation_id), payload,
                  f"{data.get('attempt', 1)}:{data.get('index', 0)}", round_id,
                  "1" if turn_id else "0"],
        )
        return bool(done)

    def _publish_delta_in_two(self, conversation_id: str, data: dict[str, Any],
                              payload: str) -> bool:
        """The delta kept, then published: two round trips (the embedded pub/sub).

        Careful: the check and the append are one transaction, and `close_round` reads the
        text in one too, so a delta is either in the text an interrupt keeps or never
        published. A close between the two may let the delta reach a stream after the round
        closed; a stream drops the deltas of a round it has sent as interrupted.
        """
        round_id = data["round_id"]
        pipe = self.client.pipeline(transaction=True)
        pipe.exists(_closed_key(round_id))
        if data.get("index") == 0:
            pipe.set(_partial_key(round_id), data["text"].encode("utf-8"), ex=PARTIAL_TTL_S)
            if data.get("turn_id"):
                pipe.set(_turn_round_key(data["turn_id"]), round_id, ex=PARTIAL_TTL_S)
        else:
            pipe.append(_partial_key(round_id), data["text"].encode("utf-8"))
            pipe.expire(_partial_key(round_id), PARTIAL_TTL_S)
        pipe.set(_mark_key(round_id), f"{data.get('attempt', 1)}:{data.get('index', 0)}",
                 ex=PARTIAL_TTL_S)
        closed = pipe.execute()[0]
        if closed:
            return False
        self.client.publish(channel(conversation_id), payload)
        return True

    def partial_of_turn(self, turn_id: str) -> Partial | None:
        """The text the turn's latest round has streamed so far; None if none is known.

        Careful: the text and its mark are read in one transaction, so the mark says
        exactly which deltas the text holds; a stream subscribed before this read skips
        the live deltas up to the mark and misses none after it.
        """
        try:
            raw = self.client.get(_turn_round_key(turn_id))
            if raw is None:
                return None
            round_id = raw.decode() if isinstance(raw, bytes) else str(raw)
            pipe = self.client.pipeline(transaction=True)
            pipe.get(_partial_key(round_id))
            pipe.get(_mark_key(round_id))
            text, mark = pipe.execute()
        except redis.RedisError:
            return None
        if text is None or mark is None:
            return None
        attempt, _, index = mark.decode().partition(":")
        return Partial(round_id, int(attempt), int(index), text.decode("utf-8", errors="replace"))

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
