"""A worker's transcripts of the conversations it steps, so a model step renders only new events.

A model call sends the whole context, but what the closed turns of a conversation render to
never changes (inv. 1): each `Transcript` (core/transcript.py) is kept here, per conversation,
and checked against the view before it is used (its summary, its first and last events), so a
stale one, or another conversation's, is never used: it is rendered again instead. The request
is exactly what `render` gives; nothing kept here is needed for correctness.

At most `conversations` transcripts are kept, and about `max_bytes` of messages
(core/weight.py), the least recently used going first: a long conversation's transcript
weighs what its turns do.
"""
from __future__ import annotations

import threading
from collections.abc import Sequence

from agentq.core.events import View
from agentq.core.lru import WeightedLRU
from agentq.core.render import render
from agentq.core.request import Request, ToolSpec
from agentq.core.transcript import Transcript, render_after
from agentq.core.weight import total_weight, weight

DEFAULT_MAX_BYTES = 64 * 2**20


class Transcripts:
    """A per-process LRU of each conversation's transcript, `conversations` of them (0: off)
    and about `max_bytes` of them at most."""

    def __init__(self, conversations: int, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.size = conversations
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._kept: WeightedLRU[str, Transcript] = WeightedLRU(conversations, max_bytes)

    @property
    def bytes(self) -> int:
        return self._kept.weight

    def __len__(self) -> int:
        return len(self._kept)

    def render(self, view: View, tools: Sequence[ToolSpec] = ()) -> Request:
        """`render(view, tools)`, rendering only the events after the kept transcript."""
        if self.size <= 0:
            return render(view, tools)
        kept = self._get(view.conversation_id)
        request, closed = render_after(kept[0] if kept else None, view, tools)
        self._put(view.conversation_id, closed, _weight(closed, kept))
        return request

    def _get(self, conversation_id: str) -> tuple[Transcript, int] | None:
        with self._lock:
            return self._kept.get(conversation_id)

    def _put(self, conversation_id: str, transcript: Transcript, size: int) -> None:
        with self._lock:
            self._kept.put(conversation_id, transcript, size)


def _weight(transcript: Transcript, kept: tuple[Transcript, int] | None) -> int:
    """The transcript's weight; when it extends the kept one, only its new messages are weighed."""
    if kept is not None:
        old, old_weight = kept
        n = len(old.messages)
        if transcript is old:
            return old_weight
        if (n and len(transcript.messages) >= n and transcript.messages[n - 1] is old.messages[n - 1]
                and transcript.summary is old.summary):
            return old_weight + total_weight(transcript.messages[n:]) + 16 * (
                len(transcript.called) - len(old.called) + len(transcript.answered) - len(old.answered))
    return weight(transcript)
