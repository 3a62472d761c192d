"""Announcers for tests of one model call: the live side's own (`LiveAnnouncer`) over a
publisher that keeps each notice's kind and data instead of sending it."""
from __future__ import annotations

from typing import Any

from agentq.live.announcer import LiveAnnouncer


class Published:
    """A publisher that keeps `(kind, data)` of each notice in `notices`."""

    def __init__(self, notices: list | None = None) -> None:
        self.notices: list[tuple[str, dict[str, Any]]] = [] if notices is None else notices

    def publish(self, conversation_id: str, kind: str, data: dict[str, Any]) -> bool:
        self.notices.append((kind, data))
        return True


def recording(notices: list) -> LiveAnnouncer:
    """An announcer that appends `(kind, data)` of each notice to `notices`."""
    return LiveAnnouncer(Published(notices))


def unheard() -> LiveAnnouncer:
    """An announcer whose notices no one keeps."""
    return LiveAnnouncer(Published())
