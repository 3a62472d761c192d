"""Follow-ups the API sent, kept in order for the test to run: a FollowUpSender with no broker."""
from __future__ import annotations

from agentq.followups import FollowUp


class RecordingSender:
    """Keeps every follow-up it is sent, in order, in `sent`."""

    def __init__(self) -> None:
        self.sent: list[FollowUp] = []

    def send(self, followups: list[FollowUp]) -> None:
        self.sent.extend(followups)
