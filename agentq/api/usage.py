"""The shapes of /v1/usage: a range of hours, how to group it, and the tokens spent in it
and what they cost."""
from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Literal

from pydantic import AfterValidator, ConfigDict, Field, StringConstraints, WithJsonSchema, model_validator
from pydantic_core import PydanticCustomError

from agentq.api.common import AnswerModel, RequestModel, Timestamp, Token

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


class UsageQuery(RequestModel):
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


class UsageRow(AnswerModel):
    """One period (and group): `group` has the dimensions asked for, null meaning none (no
    agent; the profile's default model)."""

    start: str = Field(description="the start of the UTC hour or day")
    group: dict[str, str | None] = Field(description="the dimensions asked for (`by`)")
    input_tokens: int
    output_tokens: int
    cached_tokens: int = Field(description="input tokens read from the provider's prompt cache")
    reasoning_tokens: int = Field(description="output tokens spent reasoning")
    calls: int = Field(description="model calls")
    cost: Decimal = Field(Decimal(0), description="what the calls cost at the operator's prices, "
                          "in its currency (decimal text, 9 places); unpriced models cost 0")


class UsageReport(AnswerModel):
    start: str = Field(description="the start of the first hour counted (`from`)")
    end: str = Field(description="the end of the range, excluded (`to`)")
    group_by: Literal["hour", "day"]
    by: list[str]
    tenant: str | None = Field(description="whose usage: null is every tenant (the operator)")
    rows: list[UsageRow]
    truncated: bool = Field(description="more rows matched than `limit`: narrow the range")


class OverviewQuery(RequestModel):
    """The operator's overview of a range of days: usage and cost per tenant and agent by
    UTC day, and the slowest and costliest turns that started in it."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    start: Timestamp = Field(alias="from", description="the first hour counted (RFC 3339)")
    end: Timestamp = Field(alias="to", description="the end of the range, excluded (RFC 3339): "
                                                   "after `from`, at most 366 days later")
    turns: int = Field(10, ge=1, le=100, description="turns per ranking")
    limit: int = Field(1000, ge=1, le=10_000, description="usage rows at most")

    @model_validator(mode="after")
    def _bounded(self) -> OverviewQuery:
        if self.end <= self.start:
            raise PydanticCustomError(INVALID_RANGE, "`to` must come after `from`")
        if (self.end - self.start).total_seconds() / 3600 > USAGE_MAX_HOURS["day"]:
            raise PydanticCustomError(INVALID_RANGE, "an overview covers at most 366 days")
        return self


class TurnCost(AnswerModel):
    """One turn of a ranking: whose, when, how long until its latest model call committed,
    and what its model calls spent (a sub-agent's turn is its own, naming its root)."""

    tenant: str
    agent: str | None
    conversation_id: str
    root_conversation_id: str | None = Field(description="the top of its tree of sub-agents")
    turn_id: str
    started_at: str
    duration_ms: int
    calls: int
    input_tokens: int
    output_tokens: int
    cost: Decimal = Field(description="decimal text, 9 places, in the operator's currency")


class Overview(AnswerModel):
    start: str = Field(description="the start of the first hour counted (`from`)")
    end: str = Field(description="the end of the range, excluded (`to`)")
    days: list[UsageRow] = Field(description="per UTC day, tenant and agent (null: none)")
    truncated: bool = Field(description="more usage rows matched than `limit`")
    slowest_turns: list[TurnCost]
    costliest_turns: list[TurnCost]
