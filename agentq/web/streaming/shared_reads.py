"""Reads of a conversation's log shared by the streams that need the same page at once.

When an event is committed, every stream of its conversation wakes with the same cursor
and asks for the same page; one query answers them all. A stream takes a read (running,
or the last one done) only if that read started after the notice that woke it arrived,
so what it gets holds every event committed before that notice: sharing never hides an
event (the log is the truth). A keep-alive's re-read, which only guards against a lost
notice, takes any read of its period.

A read also keeps its events' SSE frames, made by the first stream that asks: an event is
encoded once per read, not once per stream.

Done reads are kept KEEP_S (a keep-alive period and more), KEEP of them and about
KEEP_BYTES of events at most, the oldest going first: a stream takes only a read that
started after the notice that woke it, so an older one serves nobody, and a busy process
kept thousands of pages whole conversations long.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from agentq.core.events import Event
from agentq.core.weight import total_weight
from agentq.store.log import EventLog

KEEP = 10_000  # pages remembered at most
KEEP_S = 60.0  # and for this long at most
KEEP_BYTES = 32 * 2**20  # and about this much of their events at most (frames twice that)


@dataclass(eq=False)
class _Read:
    started_at: float
    done: threading.Event = field(default_factory=threading.Event)
    events: list[Event] | None = None
    error: BaseException | None = None
    frames: list[str] | None = None
    weight: int = 0  # of its events (core/weight.py), once done


@dataclass(frozen=True, eq=False)
class Page:
    """A page of the log as one read returned it; its frames are made once for every reader."""

    read: _Read

    @property
    def events(self) -> list[Event]:
        return list(self.read.events or ())

    def frames(self, encode: Callable[[Event], str]) -> list[str]:
        """`encode(event)` for each event, worked out by the first caller only."""
        frames = self.read.frames
        if frames is None:  # two racing callers both encode: the same text, harmless
            frames = self.read.frames = [encode(event) for event in self.read.events or ()]
        return frames


class SharedReads:
    """`list_events` of one event log, each concurrent identical page read once."""

    def __init__(self, log: EventLog) -> None:
        self.log = log
        self._lock = threading.Lock()
        self._reads: dict[tuple[str, int, int], _Read] = {}
        # the last read of each page, oldest first, and the weight of their events
        self._done: OrderedDict[tuple[str, int, int], _Read] = OrderedDict()
        self._done_bytes = 0

    def list_events(self, cid: str, *, after_seq: int, limit: int, fresh_since: float) -> list[Event]:
        """The page after `after_seq`, read at or after `fresh_since` (time.monotonic())."""
        return self.page(cid, after_seq=after_seq, limit=limit, fresh_since=fresh_since).events

    def page(self, cid: str, *, after_seq: int, limit: int, fresh_since: float) -> Page:
        """Like `list_events`, as the shared read itself (with its frames)."""
        key = (cid, after_seq, limit)
        with self._lock:
            done = self._done.get(key)
            if done is not None and done.started_at >= fresh_since:
                return Page(done)
            read = self._reads.get(key)
            mine = read is None or read.started_at < fresh_since
            if read is None or mine:
                read = self._reads[key] = _Read(time.monotonic())
        if not mine:
            read.done.wait()
            if read.error is not None:
                raise read.error
            return Page(read)
        try:
            read.events = self.log.list_events(cid, after_seq=after_seq, limit=limit)
            read.weight = total_weight(read.events)
        except BaseException as exc:
            read.error = exc
            raise
        finally:
            with self._lock:
                if self._reads.get(key) is read:
                    del self._reads[key]
                if read.error is None:
                    self._keep(key, read)
            read.done.set()
        return Page(read)

    def _keep(self, key: tuple[str, int, int], read: _Read) -> None:
        """Remember the page as the newest; forget the oldest past KEEP_S, KEEP or KEEP_BYTES."""
        old = self._done.pop(key, None)
        if old is not None:
            self._done_bytes -= old.weight
        self._done[key] = read
        self._done_bytes += read.weight
        oldest = time.monotonic() - KEEP_S
        while self._done:
            first = next(iter(self._done.values()))
            if len(self._done) <= KEEP and self._done_bytes <= KEEP_BYTES and first.started_at >= oldest:
                break
            self._done.popitem(last=False)
            self._done_bytes -= first.weight

    def kept(self) -> tuple[int, int]:
        """How many done reads are kept, and the weight of their events."""
        with self._lock:
            return len(self._done), self._done_bytes
