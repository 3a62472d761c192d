"""The text of one turn's rounds on a turn stream: from its first character, once, in order.

A stream that follows a turn (`/stream?turn_id=…`) may join it mid-round, may miss a
live delta (pub/sub is best effort), and may see a round's deltas arrive after the
round's `assistant_msg`. This keeps, per round, what the stream sent of the newest
attempt's text, and turns what arrives into the deltas a client can simply append:

- joining: the text streamed so far (`Partial`, read after the subscription) goes out
  as one delta whose `index` is the last piece it holds; live deltas up to it are skipped;
- a live delta after a gap asks for the text so far again, and sends what was missed;
- a round's `assistant_msg` first sends, as one delta, whatever of its text the stream
  has not sent; later deltas of that round are dropped.

Per round and attempt, the deltas' texts concatenate to the attempt's text; a newer
attempt starts over at its own deltas (a `retry` frame announced it).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentq.core.events import Event
from agentq.live.pubsub import Partial


@dataclass
class _Sent:
    attempt: int
    index: int
    text: str


@dataclass
class TurnText:
    """The rounds of `turn_id` as sent so far; `read_partial` reads the turn's text from Redis."""

    turn_id: str
    read_partial: Callable[[str], Partial | None]
    sent: dict[str, _Sent] = field(default_factory=dict)
    closed: set[str] = field(default_factory=set)

    def join(self) -> list[dict[str, Any]]:
        """The text the turn's current round has streamed so far, if there is any to send."""
        partial = self.read_partial(self.turn_id)
        return [] if partial is None else self.catch_up(partial)

    def live(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        """The deltas to send for one live delta of the conversation (none if not this turn's)."""
        round_id = str(data.get("round_id"))
        if data.get("turn_id") != self.turn_id or round_id in self.closed:
            return []
        sent = self.sent.get(round_id)
        at = (data["attempt"], data["index"])
        if sent is not None and at <= (sent.attempt, sent.index):
            return []  # held by text sent already
        if not _follows(sent, at):  # a gap: what was missed is in the round's text so far
            out = self.join()
            sent = self.sent.get(round_id)
            if sent is not None and at <= (sent.attempt, sent.index):
                return out
            return out + self._append(round_id, data)
        return self._append(round_id, data)

    def ended(self, event: Event) -> list[dict[str, Any]]:
        """Before a round's `assistant_msg`: the rest of its text that no delta carried."""
        if event.type != "assistant_msg" or event.turn_id != self.turn_id or not event.round_id:
            return []
        self.closed.add(event.round_id)
        sent = self.sent.pop(event.round_id, None) or _Sent(1, -1, "")
        final = event.content.get("text") or ""
        if len(final) <= len(sent.text) or not final.startswith(sent.text):
            return []
        return [_delta(self.turn_id, event.round_id, sent.attempt, sent.index + 1,
                       final[len(sent.text):])]

    def catch_up(self, partial: Partial) -> list[dict[str, Any]]:
        """The part of `partial` not sent yet, as one delta (none if its round is over)."""
        if partial.round_id in self.closed:
            return []
        sent = self.sent.get(partial.round_id)
        if sent is not None and (partial.attempt, partial.index) <= (sent.attempt, sent.index):
            return []
        known = sent.text if sent is not None and sent.attempt == partial.attempt else ""
        self.sent[partial.round_id] = _Sent(partial.attempt, partial.index, partial.text)
        if not partial.text.startswith(known) or len(partial.text) == len(known):
            return []
        return [_delta(self.turn_id, partial.round_id, partial.attempt, partial.index,
                       partial.text[len(known):])]

    def _append(self, round_id: str, data: dict[str, Any]) -> list[dict[str, Any]]:
        sent = self.sent.get(round_id)
        if sent is None or data["attempt"] != sent.attempt:
            sent = self.sent[round_id] = _Sent(data["attempt"], -1, "")
        sent.index, sent.text = data["index"], sent.text + data["text"]
        return [data]


def _follows(sent: _Sent | None, at: tuple[int, int]) -> bool:
    """Whether a delta at (attempt, index) comes right after what was sent of its round."""
    attempt, index = at
    if sent is None or attempt != sent.attempt:
        return index == 0
    return index == sent.index + 1


def _delta(turn_id: str, round_id: str, attempt: int, index: int, text: str) -> dict[str, Any]:
    return {"round_id": round_id, "turn_id": turn_id, "index": index, "attempt": attempt,
            "text": text}
