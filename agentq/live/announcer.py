"""What a step announces to live streams, as the notices `PubSub.publish` sends.

The runtime says what happened (`agentq.runtime.seams.Announcer`: a delta, a retry, new
events) and this module says how it goes on the wire: the notice's kind and its data,
stamped with the round it belongs to (inv. 6). The streams read the same shapes
(agentq.web.streaming).
"""
from __future__ import annotations

from typing import Any, Protocol


class Publisher(Protocol):
    """Sends one notice of a conversation (`agentq.live.pubsub.PubSub`)."""

    def publish(self, conversation_id: str, kind: str, data: dict[str, Any]) -> bool: ...


class LiveAnnouncer:
    """Announces a step's news on a pub/sub: deltas and retries of a round, and new events."""

    def __init__(self, pubsub: Publisher) -> None:
        self.pubsub = pubsub

    def round(self, conversation_id: str, *, turn_id: str | None, round_id: str | None
              ) -> LiveRound:
        """The announcer of one round of the conversation."""
        return LiveRound(self.pubsub, conversation_id, turn_id, round_id)

    def new_events(self, conversation_id: str, last_seq: int | None) -> bool:
        """Tell streams that the log has events through `last_seq` (None: the API appended
        some; a stream reads the log after the last seq it sent either way)."""
        return self.pubsub.publish(conversation_id, "events", {"last_seq": last_seq})


class LiveRound:
    """One round's notices: each names its round and turn."""

    def __init__(self, pubsub: Publisher, conversation_id: str, turn_id: str | None,
                 round_id: str | None) -> None:
        self.pubsub = pubsub
        self.conversation_id = conversation_id
        self.turn_id = turn_id
        self.round_id = round_id

    def delta(self, attempt: int, index: int, text: str) -> bool:
        """Delta `index` of `attempt` (False: not sent, or the round was interrupted)."""
        return self.pubsub.publish(self.conversation_id, "delta", {
            "round_id": self.round_id,
            "turn_id": self.turn_id,
            "index": index,
            "attempt": attempt,
            "text": text,
        })

    def retry(self, attempt: int | None, error: str, next_delay_s: float, *, transient: bool,
              until: str | None = None, **why: object) -> bool:
        """The call goes again in `next_delay_s` (held till `until`, for the reasons in `why`)."""
        data: dict[str, Any] = {
            "round_id": self.round_id,
            "turn_id": self.turn_id,
            "attempt": attempt,
            "error": error,
            "next_delay_s": next_delay_s,
        }
        if until is not None:
            data["until"] = until
        return self.pubsub.publish(self.conversation_id, "retry",
                                   {**data, "transient": transient, **why})
