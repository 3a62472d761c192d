"""The declared shapes of the HTTP API: every body, query and answer, as pydantic models.

Requests are validated with these models and answers are built through them, and
/openapi.json is generated from them, so the spec cannot drift from what is served.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints

from agentq.core.events import CallStatus, EventType, Executor, OnBusy
from agentq.core.settings import Settings

MAX_SEQ = 2**31 - 1
ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,255}$"
States = Literal["idle", "running", "awaiting_input", "failed", "ended"]

# Printable text without control characters: what a header or a cursor may carry.
Token = Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=r"^[^\x00-\x1f\x7f]+$")]
Text = Annotated[str, StringConstraints(min_length=1, pattern=r"\S")]


def _utc_in_range(value: datetime) -> datetime:
    """UTC, with a four-digit year: the stored timestamp text is fixed-width (inv. 7)."""
    try:
        utc = value.astimezone(timezone.utc)
    except OverflowError:
        raise ValueError("timestamp is out of range") from None
    if not 1000 <= utc.year <= 9999:
        raise ValueError("timestamp year must be between 1000 and 9999 in UTC")
    return utc


Timestamp = Annotated[AwareDatetime, AfterValidator(_utc_in_range)]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Answer(BaseModel):
    model_config = ConfigDict(frozen=True)


# -- requests ----------------------------------------------------------------------------


class CreateConversation(_Request):
    """Settings of the new conversation; every field has a default."""

    settings: Settings = Field(default_factory=Settings)


class PostMessage(_Request):
    """A user message. `created_at` defaults to the time it arrives."""

    content: Text
    on_busy: OnBusy = "enqueue"
    created_at: Timestamp | None = None


class Resolution(_Request):
    """The answer to a pending human or client call."""

    status: Literal["resolved", "errored"]
    result: Any = None


class ListConversations(_Request):
    status: States | None = Field(None, description="only conversations in this state")
    cursor: Token | None = Field(None, description="`next_cursor` of the previous page")
    limit: int = Field(50, ge=1, le=200)


class ListEvents(_Request):
    after_seq: int = Field(0, ge=0, le=MAX_SEQ)
    limit: int = Field(100, ge=1, le=1000)


class StreamQuery(_Request):
    after_seq: int = Field(0, ge=0, le=MAX_SEQ, description="replay events after this seq")
    until_idle: Literal["0", "1", "true", "false"] = Field(
        "0", description="end the stream once no turn is running"
    )


class ListToolCalls(_Request):
    status: CallStatus | None = None


class MessageHeaders(_Request):
    idempotency_key: Token | None = Field(None, alias="Idempotency-Key")


class StreamHeaders(_Request):
    last_event_id: Annotated[str, StringConstraints(pattern=r"^[0-9]{1,10}$")] | None = Field(
        None, alias="Last-Event-ID", description="the seq of the last event received; wins over after_seq"
    )


# -- answers -----------------------------------------------------------------------------


class ErrorBody(_Answer):
    code: str
    message: str
    details: Any = None


class ErrorAnswer(_Answer):
    error: ErrorBody


class PendingCall(_Answer):
    tool_call_id: str
    name: str
    args: dict[str, Any]
    executor: Executor
    expires_at: str | None


class SummarySpan(_Answer):
    from_seq: int
    to_seq: int


class Conversation(_Answer):
    id: str
    state: States
    last_seq: int
    pending: list[PendingCall]
    inbox: int
    summary: SummarySpan | None
    settings: Settings
    created_at: str
    updated_at: str


class ConversationItem(_Answer):
    id: str
    state: States
    last_seq: int
    created_at: str
    updated_at: str


class ConversationPage(_Answer):
    conversations: list[ConversationItem]
    next_cursor: str | None


class EventOut(_Answer):
    id: str
    seq: int
    type: EventType
    turn_id: str | None
    round_id: str | None
    created_at: str
    content: dict[str, Any]


class EventPage(_Answer):
    events: list[EventOut]
    next_after_seq: int | None


class MessageAnswer(_Answer):
    message_id: str
    turn_id: str | None
    queued: bool


class ToolCall(_Answer):
    tool_call_id: str
    name: str
    executor: Executor
    status: CallStatus
    args: dict[str, Any]
    result: Any = None
    round_id: str | None
    turn_id: str | None
    created_at: str
    expires_at: str | None
    resolved_at: str | None


class ToolCallList(_Answer):
    tool_calls: list[ToolCall]


class ContextValidation(_Answer):
    valid: bool
    problems: list[str]
    repairs: list[str]


class Context(_Answer):
    provider: str
    model: str
    request: dict[str, Any] = Field(description="the neutral request, as rendered and repaired")
    wire: dict[str, Any] = Field(description="the body in the provider's own shape")
    validation: ContextValidation


class Health(_Answer):
    status: Literal["ok"]


class Readiness(_Answer):
    status: Literal["ready", "not_ready"]
    checks: dict[str, str]
