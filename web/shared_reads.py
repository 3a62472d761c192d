"""Reads of a conversation's log shared by the streams that need the same page at once.

When an event is committed, every stream of its conversation wakes with the same cursor
and asks for the same page; one query answers them all. A stream joins a read only if
that read started after the notice that woke it arrived, so what it gets holds every
event committed before that notice: sharing never hides an event (the log is the truth).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from agentq.core.events import Event
from agentq.store import Store


@dataclass(eq=False)
class _Read:
    started_at: float
    done: threading.Event = field(default_factory=threading.Event)
    events: list[Event] | None = None
    error: BaseException | None = None


class SharedReads:
    """`list_events` of one store, each concurrent identical page read once."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._reads: dict[tuple[str, int, int], _Read] = {}

    def list_events(self, cid: str, *, after_seq: int, limit: int, fresh_since: float) -> list[Event]:
        """The page after `after_seq`, read at or after `fresh_since` (time.monotonic())."""
        key = (cid, after_seq, limit)
        with self._lock:
            read = self._reads.get(key)
            mine = read is None or read.started_at < fresh_since
            if mine:
                read = self._reads[key] = _Read(time.monotonic())
        if not mine:
            read.done.wait()
            if read.error is not None:
                raise read.error
            return list(read.events or ())
        try:
            read.events = self.store.list_events(cid, after_seq=after_seq, limit=limit)
        except BaseException as exc:
            read.error = exc
            raise
        finally:
            with self._lock:
                if self._reads.get(key) is read:
                    del self._reads[key]
            read.done.set()
        return list(read.events)
