"""Notices to live streams that new events are in the log, held while a task sends its follow-ups."""
from __future__ import annotations

import contextvars
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from agentq.core.events import Event
from agentq.runtime.seams import Announcer

# Notices of the running task, held until it has sent its follow-ups (Notices.held).
_HELD_NOTICES: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar(
    "agentq_held_notices", default=None
)


class Notices:
    """Announces new events to live streams, at once or when `held` ends."""

    def __init__(self, announcer: Announcer) -> None:
        self.announcer = announcer

    def notify(self, conversation_id: str, events: Sequence[Event]) -> None:
        """Tell streams that `events` are in the log (now, or when `held` ends)."""
        if not events:
            return
        held = _HELD_NOTICES.get()
        if held is None:
            self.announcer.new_events(conversation_id, events[-1].seq)
        else:
            held[conversation_id] = max(held.get(conversation_id, 0), events[-1].seq)

    def notify_now(self, conversation_id: str, events: Sequence[Event]) -> None:
        """Tell streams that `events` are in the log now, even while notices are held, and
        drop a held notice they make stale: for a turn's end, which its streams should hear
        before the read of whether a message waits (the only step that can follow)."""
        if not events:
            return
        self.announcer.new_events(conversation_id, events[-1].seq)
        held = _HELD_NOTICES.get()
        if held is not None and held.get(conversation_id, 0) <= events[-1].seq:
            held.pop(conversation_id, None)

    @contextmanager
    def held(self) -> Iterator[None]:
        """Publish the block's notices when it ends, the newest per conversation.

        A task holds them while it commits and sends its follow-ups: the next step's task
        goes out first, and a notice (a Redis round trip) no longer delays it. A stream
        reads the log itself on a notice, so a later notice loses nothing.
        """
        held: dict[str, int] = {}
        token = _HELD_NOTICES.set(held)
        try:
            yield
        finally:
            _HELD_NOTICES.reset(token)
            for conversation_id, last_seq in held.items():
                self.announcer.new_events(conversation_id, last_seq)
