"""The shapes of a conversation's log (/v1/conversations/<id>/events): a page of events, and
the live stream of them, its deltas, retries and end, frame by frame."""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, PlainValidator, StringConstraints, WithJsonSchema

from agentq.api.common import ID_PATTERN, MAX_SEQ, AnswerModel, RequestModel, States
from agentq.core.events import EventType


class ListEvents(RequestModel):
    after_seq: int = Field(0, ge=0, le=MAX_SEQ)
    limit: int = Field(100, ge=1, le=1000)


class StreamQuery(RequestModel):
    after_seq: int = Field(0, ge=0, le=MAX_SEQ, description="replay events after this seq")
    until_idle: Literal["0", "1", "true", "false"] = Field(
        "0", description="end the stream once no turn is running"
    )
    turn_id: Annotated[str, StringConstraints(pattern=ID_PATTERN)] | None = Field(
        None, description="follow this turn only (the `turn_id` a message's answer names), "
                          "its text from the first delta, and end once it is over")
    include_children: Literal["0", "1", "true", "false"] = Field(
        "0", description="also send the text deltas of the conversation's sub-agents (its "
                         "direct children) as `child_delta` frames naming the child")


def _seq_text(value: Any) -> int:
    """A header's seq: up to ten digits; one past any seq a log can hold means "after the end"
    (Postgres seqs are 32-bit: a larger number must not reach a query)."""
    if not isinstance(value, str) or not re.fullmatch(r"[0-9]{1,10}", value):
        raise ValueError("must be a seq: up to ten digits")
    return min(int(value), MAX_SEQ)


SeqHeader = Annotated[
    int,
    PlainValidator(_seq_text),
    WithJsonSchema({"type": "string", "pattern": r"^[0-9]{1,10}$"}),
]


class StreamHeaders(RequestModel):
    last_event_id: SeqHeader | None = Field(
        None, alias="Last-Event-ID", description="the seq of the last event received; wins over after_seq"
    )


class EventOut(AnswerModel):
    id: str
    seq: int
    type: EventType
    turn_id: str | None
    round_id: str | None
    created_at: str
    content: dict[str, Any]


class EventPage(AnswerModel):
    events: list[EventOut]
    next_after_seq: int | None


class StreamDelta(AnswerModel):
    """`event: delta`: a piece of a response as it streams, stamped with its round."""

    round_id: str
    turn_id: str | None
    index: int
    attempt: int
    text: str


class StreamChildDelta(AnswerModel):
    """`event: child_delta` (with ?include_children=1): a piece of a sub-agent's response,
    on its parent's stream; `conversation_id` is the child's, the round and turn its own.
    Not a StreamDelta: a loop that prints the parent's text prints none of the child's."""

    conversation_id: str
    round_id: str
    turn_id: str | None
    index: int
    attempt: int
    text: str


class BudgetSpent(AnswerModel):
    """A token or money budget that stopped a model call (`details` of a `budget_exceeded`
    error, `budget` of a held step's retry notice, `data.budget` of the `budget.exceeded`
    webhook)."""

    tenant: str
    scope: Literal["tenant", "agent", "conversation"]
    period: Literal["hour", "day", "month", "life"]
    limit: int | str = Field(description="tokens; for a money budget, an amount as decimal text")
    spent: int | str = Field(description="tokens; for a money budget, an amount as decimal text")
    resets_at: str | None = Field(description="when the period resets; null: never (life)")
    agent: str | None
    conversation_id: str
    on_exceeded: Literal["fail", "wait"]
    unit: Literal["tokens", "cost"] = Field("tokens", description="what the budget counts")


class StreamRetry(AnswerModel):
    """`event: retry`: a transient provider error, and the round is tried again; or a step
    held (`attempt` null) until `until`, holding no worker: its endpoint's circuit is open
    (`circuit`), or a token budget is spent until its period resets (`budget`)."""

    round_id: str | None = Field(description="null for a summary's call")
    turn_id: str | None
    attempt: int | None = Field(description="null when the step is held")
    error: str
    next_delay_s: float
    transient: bool
    until: str | None = Field(None, description="when a held step is tried again")
    circuit: Literal["open"] | None = None
    budget: BudgetSpent | None = Field(None, description="the spent budget it waits for")


class StreamEnd(AnswerModel):
    """`event: end` (with ?until_idle=1 or ?turn_id=): no turn is running, or the turn
    followed is over; the stream closes."""

    state: States | Literal["gone"]
    last_seq: int
    turn_id: str | None = Field(None, description="the turn followed, on a turn stream")


# The JSON in `data:` of each stream event, by its `event:` name.
STREAM_DATA: dict[str, type[BaseModel]] = {
    "event": EventOut, "delta": StreamDelta, "retry": StreamRetry, "end": StreamEnd,
    "child_delta": StreamChildDelta,
}
