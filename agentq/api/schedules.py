"""The shapes of /v1/schedules: a cron expression in a time zone or an interval, what each
slot's run does (start a conversation from an agent, or post into a conversation), its
catch-up rule and what becomes of a call that waits for a person in a run."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from agentq.api.common import ID_PATTERN, AnswerModel, BodyModel
from agentq.api.messages import Content

Name = Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=r"^[^\x00-\x1f\x7f]+$")]
CronText = Annotated[str, StringConstraints(min_length=9, max_length=200,
                                            pattern=r"^[0-9A-Za-z*/,\- ?#LW]+$")]
ZoneName = Annotated[str, StringConstraints(min_length=1, max_length=64,
                                            pattern=r"^[A-Za-z0-9_+\-]+(/[A-Za-z0-9_+\-]+)*$")]
RefText = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
MAX_EVERY_S = 366 * 86_400.0
MAX_EXPIRE_S = 30 * 86_400.0


class CatchUpRule(BodyModel):
    """What a tick fires of the slots missed while nothing ran (older than the operator's
    grace): `skip` none, `latest` the newest only, `all` each, at most `max_slots` (the newest)
    and none older than `max_age_s`; the operator's policy bounds both."""

    mode: Literal["skip", "latest", "all"] = Field(default="skip")
    max_slots: int = Field(default=1, ge=1, le=100_000)
    max_age_s: float | None = Field(default=None, gt=0, le=366 * 86_400.0)


class ApprovalRule(BodyModel):
    """A call that waits for a person in a run: `wait` as its tool says, or `expire` after
    `expire_after_s` (an approval is then refused by the system, a question unanswered)."""

    mode: Literal["wait", "expire"] = "wait"
    expire_after_s: float | None = Field(default=None, gt=0, le=MAX_EXPIRE_S)


class CreateSchedule(BodyModel):
    """`cron` (five fields, read in `timezone`) or `every_s`; `agent` (a new conversation each
    slot) or `conversation_id` (the message posted into it); `message` is what each run says."""

    name: Name
    cron: CronText | None = None
    timezone: ZoneName = "UTC"
    every_s: float | None = Field(None, gt=0, le=MAX_EVERY_S)
    agent: RefText | None = Field(None, description="`name` or `name@version`")
    conversation_id: RefText | None = None
    message: Content
    catch_up: CatchUpRule = Field(default_factory=lambda: CatchUpRule())
    approvals: ApprovalRule = Field(default_factory=lambda: ApprovalRule())
    paused: bool = False


class ListSchedules(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    upcoming: int = Field(3, ge=0, le=50, description="how many next slots each schedule lists")


class OneSchedule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    upcoming: int = Field(10, ge=0, le=100, description="how many next slots to list")


class ListRuns(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    limit: int = Field(50, ge=1, le=500)


class CatchUpOut(AnswerModel):
    mode: str
    max_slots: int
    max_age_s: float | None


class ApprovalsOut(AnswerModel):
    mode: str
    expire_after_s: float | None


class ScheduleOut(AnswerModel):
    """A schedule, with the next slots it will fire (none while paused)."""

    id: str
    name: str
    cron: str | None
    timezone: str | None
    every_s: float | None
    action: Literal["start", "post"]
    agent: str | None
    conversation_id: str | None
    message: str | list[dict]
    catch_up: CatchUpOut
    approvals: ApprovalsOut
    paused: bool
    next_runs: list[str]
    created_at: str
    updated_at: str


class ScheduleList(AnswerModel):
    schedules: list[ScheduleOut]


class RunOut(AnswerModel):
    """One fired slot: the conversation its run started or posted to."""

    slot_at: str
    status: Literal["due", "fired", "failed", "given_up"]
    conversation_id: str
    message_id: str | None
    error: str | None  # why it failed or was given up, or why its last attempt failed
    fired_at: str | None
    attempts: int = 0  # how often a tick tried to carry it out
    retry_at: str | None = None  # a due run whose attempt failed: tried again from then


class RunList(AnswerModel):
    runs: list[RunOut]
