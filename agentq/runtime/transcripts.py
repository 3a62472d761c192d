"""A worker's transcripts of the conversations it steps, so a model step renders only new events.

A model call sends the whole context, but what the closed turns of a conversation render to
never changes (inv. 1): each `Transcript` (core/transcript.py) is kept here, per conversation,
and checked against the view before it is used (its summary, its first and last events), so a
stale one, or another conversation's, is never used: it is rendered again instead. The request
is exactly what `render` gives; nothing kept here is needed for correctness.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from agentq.core.events import View
from agentq.core.render import render
from agentq.core.request import Request, ToolSpec
from agentq.core.transcript import Transcript, render_after


class Transcripts:
    """A per-process LRU of each conversation's transcript, `conversations` of them (0: off)."""

    def __init__(self, conversations: int) -> None:
        self.size = conversations
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, Transcript] = OrderedDict()

    def render(self, view: View, tools: Sequence[ToolSpec] = ()) -> Request:
        """`render(view, tools)`, rendering only the events after the kept transcript."""
        if self.size <= 0:
            return render(view, tools)
        request, closed = render_after(self._get(view.conversation_id), view, tools)
        self._put(view.conversation_id, closed)
        return request

    def _get(self, conversation_id: str) -> Transcript | None:
        with self._lock:
            kept = self._kept.get(conversation_id)
            if kept is not None:
                self._kept.move_to_end(conversation_id)
            return kept

    def _put(self, conversation_id: str, transcript: Transcript) -> None:
        with self._lock:
            self._kept[conversation_id] = transcript
            self._kept.move_to_end(conversation_id)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
