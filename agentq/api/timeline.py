"""The shapes of a turn's timeline and a conversation's tree of agents (agentq.core.timeline).

Times are RFC 3339 text in UTC, as everywhere in the API; `null` where a bar has not ended.
`cost` is what the commit recorded at the prices in force (agentq.core.prices), as text.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentq.api.common import AnswerModel, States


class TimelineAttempt(AnswerModel):
    number: int = Field(description="1 for the first claim of the step")
    worker: str | None = Field(description="the worker process that claimed it")
    claimed_at: str | None
    ended_at: str | None = Field(description="known for the last attempt; the next claim "
                                             "bounds an earlier one")
    outcome: str = Field(description="done, retried, died, released, given_up, cancelled, "
                                     "timeout or running")
    error: str | None = None


class TimelineWait(AnswerModel):
    kind: Literal["slot", "person"] = Field(description="for a slot of the tenant's share of "
                                                        "workers, or for a person's decision")
    start: str
    end: str | None = Field(description="null: still waiting")


class TimelineStep(AnswerModel):
    step_key: str
    kind: str = Field(description="llm, tool, expire, child or compact")
    label: str
    status: str
    scheduled_at: str
    started_at: str | None
    finished_at: str | None
    attempts: list[TimelineAttempt]
    waits: list[TimelineWait]
    retries: int = Field(description="the provider's retries within the step's attempts")
    round_id: str | None = None
    tool_call_id: str | None = None
    after_seq: int | None = Field(None, description="a model step's: the seq it answers")


class TimelineCall(AnswerModel):
    tool_call_id: str
    name: str
    executor: str
    status: str
    created_at: str
    resolved_at: str | None
    needs_approval: bool
    waits: list[TimelineWait]
    child_conversation_id: str | None = Field(None, description="a sub-agent's call: the "
                                                                "conversation whose timeline "
                                                                "answers it")
    child_state: str | None = None
    child_agent: str | None = None


class TimelineModelCall(AnswerModel):
    step_key: str | None
    round_id: str | None
    at: str = Field(description="when its answer was committed")
    usage: dict[str, Any] = Field(description="tokens, as the provider counted them")
    interrupted: bool
    time_to_first_token_ms: int | None = None
    cost: str | None = Field(None, description="the call's cost, decimal text; null: unpriced")


class TimelineMark(AnswerModel):
    """An event of the turn with no bar of its own (an error, a handoff, a guardrail, …)."""

    seq: int
    type: str
    at: str
    content: dict[str, Any]


class TurnTimeline(AnswerModel):
    conversation_id: str
    turn_id: str
    started_at: str
    ended_at: str | None = Field(description="null while the turn runs")
    steps: list[TimelineStep]
    calls: list[TimelineCall]
    model_calls: list[TimelineModelCall]
    marks: list[TimelineMark]


class TreeNodeOut(AnswerModel):
    id: str
    parent_conversation_id: str | None
    parent_call_id: str | None
    depth: int = Field(description="0 at the top of the tree asked for")
    state: States
    agent: str | None
    input_tokens: int
    output_tokens: int
    model_calls: int
    cost: str = Field(description="what its model calls cost, decimal text (docs/tenancy.md)")


class ConversationTree(AnswerModel):
    """The conversation and its children and grandchildren, parents before children."""

    conversation_id: str
    nodes: list[TreeNodeOut]
