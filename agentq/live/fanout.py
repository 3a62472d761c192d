"""One Redis subscription per process, fanned out to every live stream of that process.

A stream asks the `Fanout` for a `Feed` of its channel: the process's one pub/sub
connection subscribes to the channel when its first feed opens and unsubscribes when its
last one closes, and a listener thread copies each notice into every feed of the channel.
A feed's buffer is bounded: a stream that does not keep up is ended (its client
reconnects with Last-Event-ID and replays from the log, which is the truth; a notice is
only a wake-up, or a delta). Every feed of a channel gets the same `Notice` object, so
what a stream derives from it (its SSE frame) is worked out once per process, and a
stream takes all the notices waiting at each wake-up, so it writes them at once.

Careful: `open` returns only once Redis confirmed the subscription, so a stream that
reads the log after `open` misses no event committed after that read (see agentq/web/streaming/sse.py).
"""
from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class Notice:
    """One live message: `kind` is "delta", "retry" or "events".

    `memo` holds what readers derive from the notice (agentq/web/streaming/sse.py keeps its frame there):
    one notice is shared by every feed of its channel, so that is done once, not per feed.
    """

    kind: str
    data: dict[str, Any]
    memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    channel: str = ""  # where it was published ("" for the fanout's own wake-ups)


WAKE = Notice("events", {"last_seq": None})  # re-read the log: something may have been missed
LISTEN_S = 1.0
CONFIRM_S = 30.0  # under a burst of openings the listener may take a while to come round
WAVE = 32  # feeds woken before the listener lets the woken streams run


class FeedEnded(Exception):
    """Why a stream stops: its buffer overflowed, the client went away, the server stops."""


@dataclass(eq=False)
class Feed:
    """One stream's notices, in arrival order, at most `capacity` of them waiting.

    Iterating yields each notice, or None after `timeout_s` without one (for keep-alives),
    and raises FeedEnded once the feed is ended.
    """

    channel: str
    capacity: int
    timeout_s: float
    fanout: Fanout | None = field(default=None, repr=False)
    # other channels whose deltas (only) this feed takes too: a parent's stream that follows
    # its sub-agents' text (agentq/web/streaming/children.py)
    joined: set[str] = field(default_factory=set)
    ended: str | None = None  # the reason, once ended
    received_at: float = 0.0  # time.monotonic() when the last notice `get` returned arrived
    _buffer: deque = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # Set while a notice waits or the feed is ended (changed only under _lock). Why not a
    # Condition: under gevent its wait allocates a lock and notify walks a list, per notice.
    _ready: threading.Event = field(default_factory=threading.Event)

    def __iter__(self) -> Iterator[Notice | None]:
        while True:
            yield self.get(self.timeout_s)

    def batches(self) -> Iterator[list[tuple[Notice, float]]]:
        """Like iterating, but each wake-up yields every notice waiting (see `take`)."""
        while True:
            yield self.take(self.timeout_s)

    def close(self) -> None:
        """Leave the fanout (unsubscribing if this was the channel's last feed)."""
        if self.fanout is not None:
            self.fanout.close(self)

    def put(self, notice: Notice, arrived_at: float | None = None) -> bool:
        """Add a notice (arrived at `arrived_at`, else now); False if the buffer is full
        (the caller ends the feed)."""
        arrived_at = time.monotonic() if arrived_at is None else arrived_at
        if notice.channel and notice.channel != self.channel and notice.kind != "delta":
            return True  # a joined channel's events and retries are not this stream's
        with self._lock:
            if self.ended:
                return True
            if notice.kind == "events" and self._buffer and self._buffer[-1][0].kind == "events":
                self._buffer[-1] = (notice, arrived_at)  # one read, as fresh as the newer
                return True
            if len(self._buffer) >= self.capacity:
                return False
            self._buffer.append((notice, arrived_at))
            self._ready.set()
            return True

    def get(self, timeout_s: float) -> Notice | None:
        """The next notice, or None after `timeout_s` without one; FeedEnded once ended."""
        self._ready.wait(timeout_s)
        with self._lock:
            if self.ended:
                raise FeedEnded(self.ended)
            if not self._buffer:
                self.received_at = time.monotonic()  # a keep-alive tick: read what is there now
                return None
            notice, self.received_at = self._buffer.popleft()
            if not self._buffer:
                self._ready.clear()
            return notice

    def take(self, timeout_s: float) -> list[tuple[Notice, float]]:
        """Every waiting notice with its arrival (time.monotonic()), oldest first; [] after
        `timeout_s` without one; FeedEnded once ended.

        Why: a stream that writes all it has in one go switches and writes once per
        wake-up, not once per notice, and the more it fell behind the bigger its batch.
        """
        self._ready.wait(timeout_s)
        with self._lock:
            if self.ended:
                raise FeedEnded(self.ended)
            taken = list(self._buffer)
            self._buffer.clear()
            self._ready.clear()
            return taken

    def end(self, reason: str) -> bool:
        """Stop the feed (the first reason sticks); True if this call ended it."""
        with self._lock:
            if self.ended:
                return False
            self.ended = reason
            self._buffer.clear()
            self._ready.set()
            return True


@dataclass(eq=False)
class _Waiter:
    kind: str  # "subscribe" or "unsubscribe"
    done: threading.Event = field(default_factory=threading.Event)


class Fanout:
    """The process's pub/sub connection and the feeds of its live streams."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._feeds: dict[str, set[Feed]] = {}
        self._waiters: dict[str, deque[_Waiter]] = {}
        self._pubsub: Any = None
        self._listener: threading.Thread | None = None
        self._stopping = threading.Event()

    def open(self, name: str, *, capacity: int, timeout_s: float) -> Feed:
        """A feed of the channel's notices, subscribed when this returns (or raises)."""
        feed = Feed(name, capacity, timeout_s, self)
        self._add(feed, name)
        return feed

    def join(self, feed: Feed, name: str) -> None:
        """Add another channel's deltas to the feed, subscribed when this returns (or raises)."""
        if name == feed.channel or name in feed.joined:
            return
        feed.joined.add(name)
        self._add(feed, name)

    def leave(self, feed: Feed, name: str) -> None:
        """Stop taking a joined channel's deltas (unsubscribing if no feed wants it now)."""
        if name in feed.joined:
            feed.joined.discard(name)
            self._remove(feed, name)

    def close(self, feed: Feed) -> None:
        """Forget the feed; the last one of a conversation unsubscribes (confirmed, or timed out)."""
        for name in list(feed.joined):
            self.leave(feed, name)
        self._remove(feed, feed.channel)

    def _add(self, feed: Feed, name: str) -> None:
        with self._lock:
            self._start()
            feeds = self._feeds.setdefault(name, set())
            feeds.add(feed)
            waiter = self._send("subscribe", name) if len(feeds) == 1 else self._pending(name)
        if waiter is not None and not waiter.done.wait(CONFIRM_S):
            feed.joined.discard(name)
            self._remove(feed, name)
            raise TimeoutError(f"Redis did not confirm the subscription to {name}")

    def _remove(self, feed: Feed, name: str) -> None:
        waiter = None
        with self._lock:
            feeds = self._feeds.get(name)
            if feeds is None or feed not in feeds:
                return
            feeds.discard(feed)
            if not feeds:
                del self._feeds[name]
                try:
                    waiter = self._send("unsubscribe", name)
                except Exception as exc:  # the connection is gone: nothing is subscribed
                    log.warning("could not unsubscribe from %s: %s", name, exc)
        if waiter is not None:
            waiter.done.wait(CONFIRM_S)

    def feeds(self) -> list[Feed]:
        with self._lock:
            return list({f for feeds in self._feeds.values() for f in feeds})

    def channels(self) -> int:
        with self._lock:
            return len(self._feeds)

    def stop(self, reason: str = "shutdown") -> None:
        """End every feed and the listener: the process is going away."""
        self._stopping.set()
        for feed in self.feeds():
            feed.end(reason)

    def _start(self) -> None:
        if self._pubsub is None:
            self._pubsub = self._client.pubsub()
        if self._listener is None or not self._listener.is_alive():
            self._listener = threading.Thread(target=self._listen, name="agentq-fanout", daemon=True)
            self._listener.start()

    def _send(self, kind: str, name: str) -> _Waiter:
        waiter = _Waiter(kind)
        self._waiters.setdefault(name, deque()).append(waiter)
        (self._pubsub.subscribe if kind == "subscribe" else self._pubsub.unsubscribe)(name)
        return waiter

    def _pending(self, name: str) -> _Waiter | None:
        """The confirmation another stream of the channel still waits for, if any."""
        waiters = [w for w in self._waiters.get(name, ()) if w.kind == "subscribe"]
        return waiters[-1] if waiters else None

    def _listen(self) -> None:
        failing = False
        while not self._stopping.is_set():
            try:
                message = self._pubsub.get_message(timeout=LISTEN_S)
            except Exception as exc:  # Redis went away: redis-py reconnects and resubscribes
                if not failing:
                    log.warning("live updates interrupted (%s); streams re-read the log", exc)
                failing = True
                time.sleep(LISTEN_S)
                continue
            if failing:  # notices sent meanwhile are lost: every stream re-reads the log
                failing = False
                self._deliver_to_all(WAKE)
            if message is not None:
                self._dispatch(message)

    def _dispatch(self, message: dict[str, Any]) -> None:
        name = _text(message.get("channel"))
        kind = message.get("type")
        if kind in ("subscribe", "unsubscribe"):
            self._confirm(kind, name)
            return
        if kind != "message":
            return
        try:
            body = json.loads(message["data"])
            notice = Notice(body["kind"], body["data"], channel=name)
        except (ValueError, KeyError, TypeError):
            log.warning("ignored a malformed notice on %s", name)
            return
        with self._lock:
            feeds = list(self._feeds.get(name, ()))
        self._deliver(feeds, notice)

    def _confirm(self, kind: str, name: str) -> None:
        with self._lock:
            waiters = self._waiters.get(name)
            if waiters and waiters[0].kind == kind:
                waiters.popleft().done.set()
            if waiters is not None and not waiters:
                del self._waiters[name]

    def _deliver_to_all(self, notice: Notice) -> None:
        self._deliver(self.feeds(), notice)

    def _deliver(self, feeds: list[Feed], notice: Notice) -> None:
        """Wake the feeds a wave at a time, letting the woken streams (and anything else
        that is ready, such as a request) run between waves.

        Why: under gevent, waking a thousand streams at once queues a thousand writes in
        front of every request that waits for the database; in waves, a request waits
        for one wave at most.
        """
        arrived_at = time.monotonic()
        for index, feed in enumerate(feeds):
            if index and index % WAVE == 0:
                time.sleep(0)  # a yield: to the other greenlets under gevent, else threads
            if not feed.put(notice, arrived_at):
                feed.end("overflow")  # the stream's watcher logs and counts it


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value or "")
