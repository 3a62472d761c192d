"""Decoded events of the conversations a process works on, so a step reads only what is new.

Events never change (inv. 1) and seq is gap-free per conversation, so a run of events
once read stays true. A read asks for the events between two seqs, the upper one from
the conversation row it just read; the cache answers what it holds and the database the
rest (seq above the cached ones, below the row's `next_seq`). It never answers past what
the row says, and a run that does not join up is dropped and read again, so a stale
cache can hide nothing and a cache of another conversation can leak nothing. A fork is a
new conversation and a summary only moves where a read starts.
Only committed reads fill it: never a read inside a write that may roll back.

It holds at most `conversations` runs and about `max_bytes` of events (core/weight.py),
whichever is reached first, evicting the least recently used: a few long conversations
weigh more than many short ones, and a count alone let a worker grow with their length.
A run heavier than the whole bound is not kept (its reads go to the database).
"""
from __future__ import annotations

import threading
from collections.abc import Callable

from agentq.core.events import Event
from agentq.core.lru import WeightedLRU
from agentq.core.weight import total_weight

# (after_seq, before_seq) -> the events between them, from the database
Load = Callable[[int, int], list[Event]]
DEFAULT_MAX_BYTES = 64 * 2**20


class EventCache:
    """A per-process LRU of each conversation's events, `conversations` of them (0: off) and
    about `max_bytes` of them at most."""

    def __init__(self, conversations: int, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.size = conversations
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._runs: WeightedLRU[str, list[Event]] = WeightedLRU(conversations, max_bytes)

    @property
    def bytes(self) -> int:
        """The weight of the events held (core/weight.py)."""
        return self._runs.weight

    def __len__(self) -> int:
        return len(self._runs)

    def events(
        self, conversation_id: str, *, after_seq: int, before_seq: int, load: Load
    ) -> list[Event]:
        """Events with after_seq < seq < before_seq: the cached run, and from the log only
        the events it lacks."""
        if self.size <= 0:
            return load(after_seq, before_seq)
        kept = self._get(conversation_id)
        if kept and _whole(kept[0], conversation_id):
            grown = _grown(kept[0], after_seq, before_seq, load)
            if grown is not None:
                run, added = grown
                self._put(conversation_id, run, kept[1] + total_weight(added))
                return _between(run, after_seq, before_seq)
        run = load(after_seq, before_seq)  # a miss, or a run that did not join: read afresh
        if run and run[0].seq == after_seq + 1 and _whole(run, conversation_id):
            self._put(conversation_id, run, total_weight(run))
        return run

    def last_seq(self, conversation_id: str) -> int | None:
        """The seq of the newest event held for the conversation, None if none is: what a
        read can ask the log for the events after, in the statement that reads the row."""
        if self.size <= 0:
            return None
        with self._lock:
            kept = self._runs.peek(conversation_id)
            return kept[0][-1].seq if kept and kept[0] else None

    def _get(self, conversation_id: str) -> tuple[list[Event], int] | None:
        with self._lock:
            return self._runs.get(conversation_id)

    def _put(self, conversation_id: str, run: list[Event], weight: int) -> None:
        with self._lock:  # a run heavier than the whole cache is not kept: read from the log
            self._runs.put(conversation_id, run, weight)

    def forget(self, conversation_id: str) -> None:
        with self._lock:
            self._runs.pop(conversation_id)


def _between(run: list[Event], after_seq: int, before_seq: int) -> list[Event]:
    """The events of a gap-free run with after_seq < seq < before_seq (a copy)."""
    first = run[0].seq
    return run[max(0, after_seq + 1 - first):max(0, before_seq - first)]


def _whole(run: list[Event], conversation_id: str) -> bool:
    """The run is this conversation's, without a gap."""
    first, last = run[0], run[-1]
    return (first.conversation_id == conversation_id == last.conversation_id
            and last.seq - first.seq == len(run) - 1)


def _grown(run: list[Event], after_seq: int, before_seq: int,
           load: Load) -> tuple[list[Event], list[Event]] | None:
    """The cached run with the events it lacks for the read read from the log: those before
    it (down to after_seq + 1) and those after it (below before_seq), and those added; None
    if they do not join up, which a gap-free log never does."""
    first, last = run[0].seq, run[-1].seq
    added: list[Event] = []
    if first > after_seq + 1:
        earlier = load(after_seq, first)
        if not earlier or earlier[0].seq != after_seq + 1 or earlier[-1].seq != first - 1:
            return None
        run = earlier + run
        added += earlier
    if last + 1 < before_seq:
        newer = load(last, before_seq)
        if newer and newer[0].seq != last + 1:
            return None
        run = run + newer
        added += newer
    return run, added
