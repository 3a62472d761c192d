"""Reading a turn's stream: frames to typed items, each once, across reconnections.

The server sends a turn's events with their seq as the SSE id, and each round's text as
deltas from its first character on every connection (agentq/web turn streams). Across
reconnections (with `Last-Event-ID`) this keeps what was already handed out, so the
items a program sees are each event once, in seq order, and deltas whose texts, per
round and attempt, concatenate to the text streamed: never a piece twice. A stream that
asked for its sub-agents' text (`include_children`) also hands out their deltas as they
come, each naming its child conversation (not replayed after a reconnection).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from agentq.api import (
    Conversation,
    EventOut,
    PendingCall,
    StreamChildDelta,
    StreamDelta,
    StreamEnd,
    StreamRetry,
)

StreamItem = EventOut | StreamDelta | StreamRetry | StreamEnd | StreamChildDelta
MAX_EVENT_BYTES = 64 * 1024 * 1024  # a tool result may be large; the operator caps it
AGENT_EXECUTOR = "agent"  # the executor of a sub-agent's call: its child conversation answers it


@dataclass
class _Round:
    attempt: int
    text: str


@dataclass
class TurnCursor:
    """What one turn's stream handed out so far."""

    turn_id: str
    last_seq: int | None = None  # the last event's seq: `Last-Event-ID` on a reconnection
    end: StreamEnd | None = None
    rounds: dict[str, _Round] = field(default_factory=dict)
    _here: set[tuple[str, int]] = field(default_factory=set)  # (round, attempt) on this connection

    def connected(self) -> None:
        """A new connection: its first delta of each round and attempt starts at character 0."""
        self._here = set()

    def accept(self, kind: str, data: str) -> StreamItem | None:
        """The item one frame stands for, or None if it was handed out already (or unknown)."""
        if kind == "event":
            event = EventOut.model_validate_json(data)
            if self.last_seq is not None and event.seq <= self.last_seq:
                return None
            self.last_seq = event.seq
            return event
        if kind == "delta":
            return self._delta(StreamDelta.model_validate_json(data))
        if kind == "retry":
            return StreamRetry.model_validate_json(data)
        if kind == "child_delta":  # live only: a reconnection never sends one again
            return StreamChildDelta.model_validate_json(data)
        if kind == "end":
            self.end = StreamEnd.model_validate_json(data)
            return self.end
        return None  # a kind this SDK does not know yet: newer servers may add some

    def _delta(self, delta: StreamDelta) -> StreamDelta | None:
        key = (delta.round_id, delta.attempt)
        known = self.rounds.get(delta.round_id)
        if key in self._here:  # the next piece on this connection
            if known is None or known.attempt != delta.attempt:
                return None
            known.text += delta.text
            return delta
        self._here.add(key)
        if known is not None and delta.text.startswith(known.text):
            rest = delta.text[len(known.text):]  # the text again from its start: hand out the rest
            known.text = delta.text
            return delta.model_copy(update={"text": rest, "attempt": known.attempt}) if rest else None
        if known is not None and delta.attempt <= known.attempt:
            return None  # an older attempt's text
        self.rounds[delta.round_id] = _Round(delta.attempt, delta.text)
        return delta


class TurnResult(BaseModel):
    """A turn as its stream ended: its events, and the conversation's state then."""

    model_config = ConfigDict(frozen=True)

    turn_id: str
    state: str
    events: list[EventOut]
    pending: list[PendingCall] = []

    @property
    def text(self) -> str:
        """The turn's last answer: the text of its last assistant_msg ("" if none)."""
        answers = [e for e in self.events if e.type == "assistant_msg"]
        return str(answers[-1].content.get("text") or "") if answers else ""

    @property
    def error(self) -> EventOut | None:
        """The error event that failed the turn, if it failed."""
        errors = [e for e in self.events if e.type == "error"]
        return errors[-1] if errors and self.state == "failed" else None


def waiting_after(calls: set[str], event: EventOut) -> None:
    """Update `calls`, the turn's calls that wait for a person or the client, with one event.

    The log says which: a `suspension` names the calls the turn now waits for (a human or
    client call, one that needs approval, a tool server's question), and a `resolution` or
    a `tool_result` ends a call's wait. A sub-agent's call is never named: its child
    conversation answers it.
    """
    if event.type == "suspension":
        calls.update(str(call_id) for call_id in event.content.get("pending") or ())
    elif event.type in ("resolution", "tool_result"):
        calls.discard(str(event.content.get("tool_call_id")))


def for_someone(pending: Sequence[PendingCall]) -> list[PendingCall]:
    """The pending calls a person or the client answers (a sub-agent's call is answered by
    its child conversation)."""
    return [call for call in pending if call.executor != AGENT_EXECUTOR]


@dataclass
class Waits:
    """A turn's events as `wait()` collects them, and its calls that wait for someone."""

    turn_id: str
    events: list[EventOut] = field(default_factory=list)
    open_calls: set[str] = field(default_factory=set)  # waiting for a person or the client

    def saw(self, item: StreamItem) -> bool:
        """Keep an event; True if, after it, the turn may be waiting for input."""
        if not isinstance(item, EventOut):
            return False
        self.events.append(item)
        waiting_after(self.open_calls, item)
        return bool(self.open_calls)

    def waiting(self, conversation: Conversation) -> bool:
        return (conversation.state == "awaiting_input" and conversation.turn_id == self.turn_id
                and bool(for_someone(conversation.pending)))

    def result(self, state: str, pending: Sequence[PendingCall] = ()) -> TurnResult:
        return TurnResult(turn_id=self.turn_id, state=state, events=self.events,
                          pending=for_someone(pending))
