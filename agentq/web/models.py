"""The declared shapes of the HTTP API: every body, query and answer, as pydantic models.

Requests are validated with these models and answers are built through them, and
/openapi.json is generated from them, so the spec cannot drift from what is served; the
SDK (agentq.client) reads the answers with the same models. Careful: this module imports
pydantic and agentq.core only, never Flask, so that the SDK can import it.
"""
from __future__ import annotations

import re
import sys
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    RootModel,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from agentq.core.agents import MAX_DESCRIPTION, OVERRIDABLE
from agentq.core.agents import NAME_PATTERN as AGENT_NAME
from agentq.core.events import CallStatus, EventType, Executor, OnBusy
from agentq.core.occurrences import EVENT_TYPES, MAX_GRACE_S
from agentq.core.parts import BadContent, read_content
from agentq.core.settings import Settings, integer

MAX_SEQ = 2**31 - 1
ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,255}$"
States = Literal["idle", "running", "awaiting_input", "failed", "ended"]

# Printable text without control characters: what a header or a cursor may carry.
Token = Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=r"^[^\x00-\x1f\x7f]+$")]
# Every character Python's str.strip() or a JSON-schema `\s` calls space, spelled out, so the
# schema's pattern and the server agree exactly on what blank means.
_SPACE = r"\t\n\v\f\r \x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
Text = Annotated[str, StringConstraints(min_length=1, pattern=f"[^{_SPACE}]")]
RFC3339 = (
    r"^2[0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
    r"(\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"
)


def _timestamp(value: Any) -> datetime:
    """An RFC 3339 text with a year 2000–2999, in UTC (the stored text is fixed-width, inv. 7)."""
    if not isinstance(value, str) or not re.fullmatch(RFC3339, value):
        raise ValueError("must be an RFC 3339 timestamp with an offset and a year from 2000 to "
                         "2999, like 2026-11-21T22:14:03.123456Z")
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        raise ValueError("is not a date and time that exists") from None


Timestamp = Annotated[
    datetime,
    PlainValidator(_timestamp),
    WithJsonSchema({"type": "string", "format": "date-time", "pattern": RFC3339}),
]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Body(_Request):
    """A JSON body: its numbers and booleans are what they say (`true` is not 1, `"0"` not 0).

    Queries and headers stay lax: their values arrive as text.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class _Answer(BaseModel):
    model_config = ConfigDict(frozen=True)


# -- requests ----------------------------------------------------------------------------


AgentRefText = Annotated[str, StringConstraints(
    pattern=AGENT_NAME[:-1] + r"(@[1-9][0-9]{0,8})?$")]
OverridableField = Literal[OVERRIDABLE]
Description = Annotated[str, StringConstraints(max_length=MAX_DESCRIPTION)]


class CreateConversation(_Body):
    """Settings of the new conversation; every field has a default. With `agent`, the
    settings are the agent's, and `settings` holds only the overrides the agent allows."""

    agent: AgentRefText | None = Field(
        None, description="an agent: `name` (its latest version, pinned now) or `name@version`")
    settings: Settings = Field(default_factory=Settings)


class CreateAgent(_Body):
    """A new agent: version 1 of its definition."""

    name: Annotated[str, StringConstraints(pattern=AGENT_NAME)]
    description: Description = ""
    settings: Settings = Field(default_factory=Settings)
    overridable: list[OverridableField] = Field(
        default_factory=list, max_length=len(OVERRIDABLE),
        description="the settings a conversation started from the agent may override")


class NewAgentVersion(_Body):
    """The next version of an agent: its whole definition (nothing is carried over)."""

    description: Description = ""
    settings: Settings = Field(default_factory=Settings)
    overridable: list[OverridableField] = Field(default_factory=list, max_length=len(OVERRIDABLE))


class TextPart(_Body):
    type: Literal["text"]
    text: Text


class ImageURLPart(_Body):
    """An image the provider fetches: https, and not on a private or local host."""

    type: Literal["image"]
    url: Annotated[str, StringConstraints(min_length=9, max_length=2048, pattern=r"^https://")]


# Base64 as `base64.b64decode(validate=True)` takes it: groups of four, padded at the end.
BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"


class ImageDataPart(_Body):
    """An image in the message: base64 of its bytes, at most settings.limits.max_image_bytes."""

    type: Literal["image"]
    media_type: Literal["image/png", "image/jpeg", "image/gif", "image/webp"]
    data: Annotated[str, StringConstraints(min_length=1, pattern=BASE64)]


ContentPart = TextPart | ImageURLPart | ImageDataPart
_PARTS = TypeAdapter(Annotated[list[ContentPart], Field(min_length=1, max_length=20)])
_TEXT = TypeAdapter(Text)


def _content(value: Any) -> str | list[dict[str, Any]]:
    """Text, or a list of parts; one error at `content` saying what is wrong."""
    if isinstance(value, str):
        try:
            return _TEXT.validate_python(value, strict=True)
        except ValidationError:
            raise ValueError("must be non-blank text or a list of parts") from None
    if not isinstance(value, list):
        raise ValueError("must be non-blank text or a list of parts")
    try:
        parts = _PARTS.validate_python(value, strict=True)
    except ValidationError as exc:
        try:  # the rule it breaks, as the log's own check says it (an https URL, a media type…)
            read_content(value, max_image_bytes=sys.maxsize)
        except BadContent as bad:
            raise PydanticCustomError("invalid_content", str(bad)) from None
        first = exc.errors(include_input=False)[0]
        where = ".".join(str(p) for p in first["loc"] if not str(p).endswith("Part"))
        raise ValueError(f"part {where}: {first['msg']}") from None
    return [part.model_dump() for part in parts]


def _part_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    return schema


Content = Annotated[Any, PlainValidator(_content), WithJsonSchema({"oneOf": [
    {**_TEXT.json_schema(), "description": "the message text"},
    {"type": "array", "minItems": 1, "maxItems": 20, "description": "text and image parts",
     "items": {"oneOf": [_part_schema(m) for m in (TextPart, ImageURLPart, ImageDataPart)]}},
]})]


class PostMessage(_Body):
    """A user message: text, or a list of text and image parts. `created_at` defaults to the
    time it arrives."""

    content: Content
    on_busy: OnBusy = "enqueue"
    created_at: Timestamp | None = None


class CallResult(_Body):
    """The answer to a pending human or client call."""

    status: Literal["resolved", "errored"]
    result: Any = None


class Decision(_Body):
    """A person's decision on a call that needs approval. It carries no arguments: an
    approved call runs with the ones the model gave, which the person saw."""

    status: Literal["approved", "rejected"]
    reason: Annotated[str, StringConstraints(min_length=1, max_length=2000)] | None = Field(
        None, description="why a call was rejected; the model reads it")


class Answer(_Body):
    """A person's answer to what a tool server asked mid-call (`elicitation` on the call):
    MCP's action, and for `accept` the content its `requested_schema` describes."""

    status: Literal["answered"]
    action: Literal["accept", "decline", "cancel"] = "accept"
    content: dict[str, Any] | None = Field(
        None, description="the answer, checked against the question's requested_schema")


class Resolution(RootModel[Annotated[CallResult | Decision | Answer,
                                     Field(discriminator="status")]]):
    """The answer to a pending call: a result, a decision on a call that needs approval, or
    an answer to its tool server's question."""

    model_config = ConfigDict(frozen=True)


class Fork(_Body):
    """Where to fork: the seq of the last event to copy; it must end a turn (0: empty)."""

    at_seq: integer(ge=0, le=MAX_SEQ)


class PutKey(_Body):
    """A tenant's own provider key for one profile: stored sealed, never shown again."""

    api_key: Annotated[str, StringConstraints(min_length=8, max_length=1024,
                                              pattern=r"^[\x21-\x7e]+$")] = Field(
        description="printable ASCII without spaces, as a provider issues it")


class ListConversations(_Request):
    status: States | None = Field(None, description="only conversations in this state")
    cursor: Token | None = Field(None, description="`next_cursor` of the previous page")
    limit: int = Field(50, ge=1, le=200)


class ListAgents(_Request):
    cursor: Token | None = Field(None, description="`next_cursor` of the previous page")
    limit: int = Field(100, ge=1, le=200)


class ListAgentVersions(_Request):
    cursor: int | None = Field(None, ge=0, le=MAX_SEQ, description="`next_cursor` of the previous page")
    limit: int = Field(100, ge=1, le=200)


class ListEvents(_Request):
    after_seq: int = Field(0, ge=0, le=MAX_SEQ)
    limit: int = Field(100, ge=1, le=1000)


class StreamQuery(_Request):
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


class ListToolCalls(_Request):
    status: CallStatus | None = None


USAGE_DIMENSIONS: tuple[str, ...] = ("tenant", "agent", "profile", "model", "conversation",
                                     "root_conversation")
_DIMENSION = f"(?:{'|'.join(USAGE_DIMENSIONS)})"


def _dimensions(value: str) -> str:
    """`by`: known dimensions, comma-separated (the pattern its JSON schema states)."""
    unknown = [name for name in value.split(",") if name not in USAGE_DIMENSIONS]
    if value and unknown:
        raise ValueError(f"`by` takes {', '.join(USAGE_DIMENSIONS)}, comma-separated; not "
                         f"{', '.join(repr(name) for name in unknown)}")
    return value


Dimensions = Annotated[str, StringConstraints(max_length=100), AfterValidator(_dimensions),
                       WithJsonSchema({"type": "string", "maxLength": 100,
                                       "pattern": f"^(?:{_DIMENSION}(?:,{_DIMENSION})*)?$"})]
# The longest range one usage read covers, per grain: a month of hours, a year of days.
USAGE_MAX_HOURS = {"hour": 31 * 24, "day": 366 * 24}
# The error type, and the API's error code, of a range the parameters' schemas cannot rule
# out: one that ends before it starts, or spans more than its grain allows.
INVALID_RANGE = "invalid_range"


class UsageQuery(_Request):
    """A range of hours [from, to) and how to group it; rollups are hourly, so `from` counts
    from the start of its hour."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    start: Timestamp = Field(alias="from", description="the first hour counted (RFC 3339)")
    end: Timestamp = Field(alias="to", description="the end of the range, excluded (RFC 3339): "
                                                   "after `from`, at most 31 days later grouped by "
                                                   "hour and 366 by day (else 422 invalid_range)")
    group_by: Literal["hour", "day"] = Field("day", description="one row per UTC hour or day")
    by: Dimensions = Field("", description="comma-separated, each once: agent, model, profile, "
                                           "conversation, root_conversation (and tenant, for "
                                           "the operator)")
    tenant: Token | None = Field(None, description="the operator only: this tenant's usage")
    limit: int = Field(1000, ge=1, le=10_000, description="rows at most")

    @model_validator(mode="after")
    def _bounded(self) -> UsageQuery:
        if self.end <= self.start:
            raise PydanticCustomError(INVALID_RANGE, "`to` must come after `from`")
        hours = (self.end - self.start).total_seconds() / 3600
        if hours > USAGE_MAX_HOURS[self.group_by]:
            raise PydanticCustomError(INVALID_RANGE, "a range grouped by {grain} covers at most "
                                      "{days} days", {"grain": self.group_by,
                                                      "days": USAGE_MAX_HOURS[self.group_by] // 24})
        return self

    def dimensions(self) -> tuple[str, ...]:
        """The dimensions `by` names, each once, in the order given."""
        return tuple(dict.fromkeys(name for name in self.by.split(",") if name))


class MessageHeaders(_Request):
    idempotency_key: Token | None = Field(None, alias="Idempotency-Key")


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


class StreamHeaders(_Request):
    last_event_id: SeqHeader | None = Field(
        None, alias="Last-Event-ID", description="the seq of the last event received; wins over after_seq"
    )


# -- answers -----------------------------------------------------------------------------


class ErrorBody(_Answer):
    code: str
    message: str
    details: Any = None


class ErrorAnswer(_Answer):
    error: ErrorBody


class Question(_Answer):
    """What a tool server asked a person mid-call (MCP elicitation): a form to fill in
    (`requested_schema`, a JSON Schema) or an address to visit (`url`)."""

    mode: Literal["form", "url"]
    message: str
    requested_schema: dict[str, Any] | None = None
    url: str | None = None


class PendingCall(_Answer):
    tool_call_id: str
    name: str
    args: dict[str, Any]
    executor: Executor
    expires_at: str | None
    needs_approval: bool = False
    elicitation: Question | None = None
    child_conversation_id: str | None = None  # a sub-agent's call: the conversation answering it


class SummarySpan(_Answer):
    from_seq: int
    to_seq: int


class SummaryInUse(SummarySpan):
    version: int
    text: str


class AgentRefOut(_Answer):
    """The agent version a conversation was started from."""

    name: str
    version: int


class ParentOut(_Answer):
    """Where a sub-agent's conversation belongs: the call it answers, its depth, its root."""

    conversation_id: str
    tool_call_id: str
    depth: int
    root_conversation_id: str


class Conversation(_Answer):
    id: str
    state: States
    last_seq: int
    turn_id: str | None = Field(None, description="the current turn, or the last one; null before any")
    pending: list[PendingCall]
    inbox: int
    summary: SummarySpan | None
    agent: AgentRefOut | None = Field(description="the agent version it runs; null: from settings")
    parent: ParentOut | None = Field(None, description="a sub-agent's conversation: the call it answers")
    settings: Settings
    created_at: str
    updated_at: str


class ConversationItem(_Answer):
    id: str
    title: str | None = Field(None, description="the first user message, on one line")
    acting_user: str | None = Field(None, description="who the latest turn acts for")
    state: States
    last_seq: int
    agent: AgentRefOut | None = Field(description="the agent version it runs; null: from settings")
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
    """The message's turn is named at once, also while it waits in the inbox (`queued`)."""

    message_id: str
    turn_id: str | None = Field(description="the turn the message starts (null only for a "
                                            "message queued before turns were named at once)")
    queued: bool


class StreamDelta(_Answer):
    """`event: delta`: a piece of a response as it streams, stamped with its round."""

    round_id: str
    turn_id: str | None
    index: int
    attempt: int
    text: str


class StreamChildDelta(_Answer):
    """`event: child_delta` (with ?include_children=1): a piece of a sub-agent's response,
    on its parent's stream; `conversation_id` is the child's, the round and turn its own.
    Not a StreamDelta: a loop that prints the parent's text prints none of the child's."""

    conversation_id: str
    round_id: str
    turn_id: str | None
    index: int
    attempt: int
    text: str


class BudgetSpent(_Answer):
    """A token budget that stopped a model call (`details` of a `budget_exceeded` error,
    `budget` of a held step's retry notice, `data.budget` of the `budget.exceeded` webhook)."""

    tenant: str
    scope: Literal["tenant", "agent", "conversation"]
    period: Literal["hour", "day", "month", "life"]
    limit: int
    spent: int
    resets_at: str | None = Field(description="when the period resets; null: never (life)")
    agent: str | None
    conversation_id: str
    on_exceeded: Literal["fail", "wait"]


class StreamRetry(_Answer):
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


class StreamEnd(_Answer):
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
    needs_approval: bool = False
    elicitation: Question | None = None
    # a sub-agent's call: the conversation that answers it (a link from the parent's call)
    child_conversation_id: str | None = None
    # a call of a sub-agent's conversation listed with its parent's: where it is, and its agent
    conversation_id: str | None = None
    agent: str | None = None


class CallContext(_Answer):
    """The context of a call, as `call.waiting` webhooks carry it."""

    conversation: dict[str, Any]
    call: dict[str, Any]
    context: dict[str, Any]


class ToolCallList(_Answer):
    tool_calls: list[ToolCall]


_ID = r"[A-Za-z0-9_.:\-]{1,255}"
# `<conversation_id>/<tool_call_id>` of the last call of the previous page ('/' is in no id).
CallCursor = Annotated[str, StringConstraints(pattern=f"^{_ID}/{_ID}$")]


class ListTenantToolCalls(_Request):
    status: CallStatus | None = Field(None, description="only calls with this status")
    executor: Executor | None = Field(None, description="only calls run by this executor")
    cursor: CallCursor | None = Field(None, description="`next_cursor` of the previous page")
    limit: int = Field(50, ge=1, le=200)


class TenantToolCall(ToolCall):
    conversation_id: str


class TenantToolCallPage(_Answer):
    tool_calls: list[TenantToolCall]
    next_cursor: str | None


class ContextValidation(_Answer):
    valid: bool
    problems: list[str]
    repairs: list[str]


class Eviction(_Answer):
    kind: Literal["tool_result", "summary", "assistant_msg", "user_msg"] = Field(
        default="tool_result", description="what was shortened")
    tool_call_id: str | None
    chars: int
    kept_chars: int


class Context(_Answer):
    profile: str
    kind: str | None = Field(description="the profile's provider kind (`function` for a "
                             "model function); null if it is gone")
    model: str
    request: dict[str, Any] = Field(description="the neutral request, as rendered and repaired")
    wire: dict[str, Any] = Field(description="the body in the provider's own shape")
    validation: ContextValidation
    summary: SummaryInUse | None = Field(description="the summary that stands for earlier events")
    evictions: list[Eviction] = Field(description="tool results shortened in this context only")
    context_tokens: int = Field(description="estimated tokens of the request")


class AgentOut(_Answer):
    """One immutable version of an agent."""

    name: str
    version: int
    digest: str = Field(description="sha256 of the canonical definition: the version's content")
    source: Literal["api", "code"] = Field(description="api: yours; code: the operator's")
    description: str
    settings: Settings = Field(description="as the definition sets them: unset fields are left out")
    overridable: list[str]
    created_at: str


class AgentList(_Answer):
    agents: list[AgentOut] = Field(description="the latest version of each agent you may use")
    next_cursor: str | None


class AgentVersionPage(_Answer):
    versions: list[AgentOut] = Field(description="oldest first")
    next_cursor: int | None


class ProfileOut(_Answer):
    """A model profile as a tenant sees it: what it may pick, never where or with which key."""

    name: str
    kind: str
    models: list[str] = Field(description='the models on offer; "*": any model name')
    default_model: str | None
    tenant_keys: Literal["never", "optional", "required"] = Field(
        description="never: the operator's key; optional: yours if set, else the operator's; "
                    "required: yours, or calls fail with missing_api_key")
    own_key_set: bool = Field(description="whether you have set a key for this profile")
    extra_body: list[str] = Field(description='extra_body fields you may send; "*": any')


class ProfileList(_Answer):
    profiles: list[ProfileOut]


class Health(_Answer):
    status: Literal["ok"]


class Readiness(_Answer):
    status: Literal["ready", "not_ready"]
    checks: dict[str, str]


# -- webhooks (/v1/webhooks) -----------------------------------------------------------------

class _WebhookBody(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


WebhookEventType = Literal["call.waiting", "call.resolved", "call.expired", "turn.completed",
                    "turn.failed", "budget.exceeded"]
assert set(get_args(WebhookEventType)) == set(EVENT_TYPES)  # one list of names, checked at import
# http(s), a host without a user or password, no fragment; what the operator allows and
# where the host is are checked beyond it (agentq.webhooks.addresses: 422 url_refused).
Url = Annotated[str, StringConstraints(
    min_length=10, max_length=2048, pattern=f"^https?://[^{_SPACE}/?#@]+([/?][^{_SPACE}#]*)?$")]
EventTypes = Annotated[list[WebhookEventType], Field(min_length=1, max_length=len(EVENT_TYPES))]


class CreateWebhook(_WebhookBody):
    """An endpoint: https (http only where the operator allows it), on a public address."""

    url: Url
    event_types: EventTypes


class ChangeWebhook(_WebhookBody):
    url: Url | None = None
    event_types: EventTypes | None = None
    enabled: bool | None = None


class RotateSecret(_WebhookBody):
    grace_s: float = Field(86_400.0, ge=0, le=MAX_GRACE_S,
                           description="how long the old secret keeps signing beside the new one")


class ListDeliveries(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    limit: int = Field(50, ge=1, le=200)


class WebhookOut(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    url: str
    event_types: list[str]
    enabled: bool
    disabled_reason: str | None
    failing_since: str | None
    previous_secret_until: str | None
    created_at: str
    updated_at: str


class WebhookWithSecret(WebhookOut):
    secret: str = Field(description="shown only now: verify deliveries with it")


class WebhookList(BaseModel):
    model_config = ConfigDict(frozen=True)

    webhooks: list[WebhookOut]


class Attempt(BaseModel):
    model_config = ConfigDict(frozen=True)

    attempt: int
    at: str
    status_code: int | None
    outcome: str


class DeliveryOut(BaseModel):
    model_config = ConfigDict(frozen=True)

    webhook_id: str
    event_type: str
    conversation_id: str
    seq: int
    status: str
    attempts: int
    last_status_code: int | None
    next_attempt_at: str | None
    delivered_at: str | None
    created_at: str
    attempt_log: list[Attempt]


class DeliveryList(BaseModel):
    model_config = ConfigDict(frozen=True)

    deliveries: list[DeliveryOut]


class UsageRow(_Answer):
    """One period (and group): `group` has the dimensions asked for, null meaning none (no
    agent; the profile's default model)."""

    start: str = Field(description="the start of the UTC hour or day")
    group: dict[str, str | None] = Field(description="the dimensions asked for (`by`)")
    input_tokens: int
    output_tokens: int
    cached_tokens: int = Field(description="input tokens read from the provider's prompt cache")
    reasoning_tokens: int = Field(description="output tokens spent reasoning")
    calls: int = Field(description="model calls")


class UsageReport(_Answer):
    start: str = Field(description="the start of the first hour counted (`from`)")
    end: str = Field(description="the end of the range, excluded (`to`)")
    group_by: Literal["hour", "day"]
    by: list[str]
    tenant: str | None = Field(description="whose usage: null is every tenant (the operator)")
    rows: list[UsageRow]
    truncated: bool = Field(description="more rows matched than `limit`: narrow the range")
