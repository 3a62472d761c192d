"""The open streams of one API process: a cap per tenant, and no stream that outlives its client.

Each stream holds a feed (agentq/live/fanout.py) and, when the server exposes it, its client's
socket. One watcher looks at every stream twice a second: a client that closed its end
(the socket reads EOF) or a write that made no progress for `stall_s` ends the stream at
once, and the socket is shut down so that a write stuck on a client that does not read
fails now instead of at the next keep-alive. A feed whose buffer overflows ends the same
way. Drops are logged and counted (`GET /metrics`).

The cap and the counts are per process: with several API processes a tenant may hold
`per_tenant` streams in each.
"""
from __future__ import annotations

import _socket  # the C sockets: a probe that never yields to (or waits in) an event loop
import contextlib
import logging
import select
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from werkzeug.wsgi import ClosingIterator

from agentq.live.pubsub import Feed

log = logging.getLogger(__name__)

SOCKET_KEYS = ("gunicorn.socket", "werkzeug.socket", "agentq.socket")
DROP_REASONS = ("overflow", "stalled", "gone", "shutdown")


@dataclass(frozen=True)
class StreamLimits:
    per_tenant: int = 1000  # AGENTQ_MAX_STREAMS_PER_TENANT
    buffer: int = 1000  # AGENTQ_STREAM_BUFFER: notices waiting for one stream
    stall_s: float = 30.0  # AGENTQ_STREAM_STALL_S: longest write without progress
    check_s: float = 0.5  # how often the watcher looks at every stream
    opening: int = 16  # streams that may be opening at once (checks, subscription)


class Subscribable(Protocol):
    """What a stream subscribes to: `feed(capacity)` subscribes and returns its feed."""

    def feed(self, capacity: int) -> Feed: ...


class TooManyStreams(Exception):
    """The tenant holds its cap of open streams in this process."""


@dataclass(eq=False)
class Stream:
    """One open stream: its tenant, its feed, its client's socket (fd) if known."""

    tenant: str
    feed: Feed
    fd: int | None
    writing_since: float | None = None  # set while the server writes a frame
    closed: bool = False
    cut: bool = False  # dropped by the watcher (or the shutdown)
    lock: threading.Lock = field(default_factory=threading.Lock)


class OpenStreams:
    """Admits, watches and releases the streams of this process."""

    def __init__(self, limits: StreamLimits) -> None:
        self.limits = limits
        self.dropped: Counter[str] = Counter()
        self.refused = 0
        self._lock = threading.Lock()
        self._streams: dict[Feed, Stream] = {}
        self._opening = threading.BoundedSemaphore(limits.opening)
        self._per_tenant: Counter[str] = Counter()
        self._watcher: threading.Thread | None = None
        self._stopping = threading.Event()

    @contextlib.contextmanager
    def opening(self) -> Iterator[None]:
        """Hold while a stream opens: a burst of openings queues here, so the requests
        that are not streams still find database connections free."""
        with self._opening:
            yield

    def open(self, tenant: str, subscription: Subscribable, environ: dict[str, Any]) -> Stream:
        """Admit a stream of `tenant` (or TooManyStreams), then subscribe its feed
        (`subscription.feed(buffer)`: `agentq.web.services.Subscription`)."""
        with self._lock:
            if self._per_tenant[tenant] >= self.limits.per_tenant:
                self.refused += 1
                raise TooManyStreams(tenant)
            self._per_tenant[tenant] += 1
            self._start_watcher()
        try:
            feed = subscription.feed(self.limits.buffer)
        except BaseException:
            self._forget_tenant(tenant)
            raise
        stream = Stream(tenant, feed, _fd_of(environ))
        with self._lock:
            self._streams[feed] = stream
        return stream

    def follow(self, stream: Stream, frames: Iterable[str]) -> Iterable[str]:
        """The frames, with the time each write takes watched; closing releases the stream."""
        # werkzeug types the iterable as bytes; a Flask response takes text frames as well
        timed = cast(Iterable[bytes], _timed(stream, frames))
        return cast(Iterable[str], ClosingIterator(timed, [lambda: self.release(stream)]))

    def release(self, stream: Stream) -> None:
        """The stream is over: unsubscribe, free its tenant's slot; its socket is no longer ours."""
        with stream.lock:
            if stream.closed:
                return
            stream.closed = True
            uncounted = None if stream.cut else stream.feed.ended  # ended before the watcher saw it
        if uncounted:
            self._count(stream, uncounted)
        with self._lock:
            self._streams.pop(stream.feed, None)
        self._forget_tenant(stream.tenant)
        stream.feed.close()

    def open_count(self) -> int:
        with self._lock:
            return len(self._streams)

    def stop(self) -> None:
        """End every stream now: the server is shutting down."""
        self._stopping.set()
        for stream in self._snapshot():
            self._drop(stream, "shutdown")

    def _forget_tenant(self, tenant: str) -> None:
        with self._lock:
            self._per_tenant[tenant] -= 1
            if self._per_tenant[tenant] <= 0:
                del self._per_tenant[tenant]

    def _snapshot(self) -> list[Stream]:
        with self._lock:
            return list(self._streams.values())

    def _start_watcher(self) -> None:
        if self._watcher is None or not self._watcher.is_alive():
            self._watcher = threading.Thread(target=self._watch, name="agentq-streams", daemon=True)
            self._watcher.start()

    def _watch(self) -> None:
        while not self._stopping.wait(self.limits.check_s):
            now = time.monotonic()
            streams = self._snapshot()
            stirred = _stirred([s.fd for s in streams if s.fd is not None and not s.closed])
            for stream in streams:
                reason = self._why_drop(stream, now, stream.fd in stirred)
                if reason:
                    self._drop(stream, reason)

    def _why_drop(self, stream: Stream, now: float, stirred: bool) -> str | None:
        """Why the stream should end now, if it should; only a `stirred` socket is probed."""
        if stream.feed.ended == "overflow":
            return "overflow"
        since = stream.writing_since
        if since is not None and now - since > self.limits.stall_s:
            return "stalled"
        if not stirred:
            return None
        with stream.lock:
            if not stream.closed and stream.fd is not None and _peer_closed(stream.fd):
                return "gone"
        return None

    def _drop(self, stream: Stream, reason: str) -> None:
        with stream.lock:
            if stream.cut:
                return
            stream.cut = True
        stream.feed.end(reason)
        self._count(stream, reason)
        if reason != "shutdown":  # at shutdown the stream ends cleanly, its last frame sent
            self._cut(stream)

    def _count(self, stream: Stream, reason: str) -> None:
        with self._lock:
            self.dropped[reason] += 1
        if reason in ("overflow", "stalled"):
            log.warning("dropped a stream of tenant %s on %s: %s", stream.tenant,
                        stream.feed.channel, _WHY[reason])

    def _cut(self, stream: Stream) -> None:
        """Shut the client's socket down, so a write stuck on it fails now."""
        with stream.lock:
            if stream.closed or stream.fd is None:
                return
            try:
                probe = _socket.socket(fileno=stream.fd)
            except OSError:
                return
            try:
                probe.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            finally:
                probe.detach()


_WHY = {
    "overflow": "its client did not keep up and its buffer of notices filled",
    "stalled": "its client read nothing for too long",
}


def _timed(stream: Stream, frames: Iterable[str]) -> Iterator[str]:
    """Marks the time from handing a frame to the server until it asks for the next one."""
    for frame in frames:
        stream.writing_since = time.monotonic()
        yield frame
        stream.writing_since = None


def _fd_of(environ: dict[str, Any]) -> int | None:
    for key in SOCKET_KEYS:
        sock = environ.get(key)
        if sock is not None:
            try:
                return sock.fileno()
            except (OSError, AttributeError):
                return None
    return None


def _stirred(fds: list[int]) -> set[int]:
    """The fds that are readable, hung up or failing, from one poll of them all.

    Why: probing each of thousands of sockets twice a second costs a syscall and a socket
    object each; one poll finds the few worth probing. Careful: a stream may close (and
    its fd be reused) meanwhile, so `_peer_closed` still checks under the stream's lock.
    """
    poller = _poll()
    for fd in fds:
        poller.register(fd, _STIR)
    return {fd for fd, _ in poller.poll(0)}


def _poll():
    """select.poll as the C library has it: one under gevent would yield to the hub."""
    try:
        from gevent import monkey
    except ImportError:
        return select.poll()
    return monkey.get_original("select", "poll")()


_STIR = select.POLLIN | getattr(select, "POLLRDHUP", 0)


def _peer_closed(fd: int) -> bool:
    """True if the client closed its end: its socket reads EOF (or fails)."""
    try:
        probe = _socket.socket(fileno=fd)
    except OSError:
        return True
    try:
        return probe.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        probe.detach()
