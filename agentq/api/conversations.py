"""The shapes of /v1/conversations: creating, listing, reading and forking a conversation."""
from __future__ import annotations

from typing import Any

from pydantic import Field

from agentq.api.agents import AgentRefOut, AgentRefText
from agentq.api.common import MAX_SEQ, AnswerModel, BodyModel, RequestModel, States, Token
from agentq.api.tool_calls import Question
from agentq.core.agents import NAME_PATTERN
from agentq.core.events import Executor
from agentq.core.handoff_targets import InputFilter
from agentq.core.settings import Settings, integer


class CreateConversation(BodyModel):
    """Settings of the new conversation; every field has a default. With `agent`, the
    settings are the agent's, and `settings` holds only the overrides the agent allows."""

    agent: AgentRefText | None = Field(
        None, description="an agent: `name` (its latest version, pinned now) or `name@version`")
    settings: Settings = Field(default_factory=Settings)


class Fork(BodyModel):
    """Where to fork: the seq of the last event to copy; it must end a turn (0: empty)."""

    at_seq: integer(ge=0, le=MAX_SEQ)


class ListConversations(RequestModel):
    status: States | None = Field(None, description="only conversations in this state")
    cursor: Token | None = Field(None, description="`next_cursor` of the previous page")
    limit: int = Field(50, ge=1, le=200)


class PendingCall(AnswerModel):
    tool_call_id: str
    name: str
    args: dict[str, Any]
    executor: Executor
    expires_at: str | None
    needs_approval: bool = False
    elicitation: Question | None = None
    child_conversation_id: str | None = None  # a sub-agent's call: the conversation answering it
    # a `once` call's run found started and unfinished (ToolCall.outcome_unknown)
    outcome_unknown: dict[str, Any] | None = None


class SummarySpan(AnswerModel):
    from_seq: int
    to_seq: int


class ParentOut(AnswerModel):
    """Where a sub-agent's conversation belongs: the call it answers, its depth, its root."""

    conversation_id: str
    tool_call_id: str
    depth: int
    root_conversation_id: str


class Conversation(AnswerModel):
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
    held_by: AgentRefOut | None = Field(
        None, description="the agent a handoff gave it to, whose settings it runs with; "
                          "null: the agent (or settings) it started with")


class ConversationItem(AnswerModel):
    id: str
    title: str | None = Field(None, description="the first user message, on one line")
    acting_user: str | None = Field(None, description="who the latest turn acts for")
    state: States
    last_seq: int
    agent: AgentRefOut | None = Field(description="the agent version it runs; null: from settings")
    created_at: str
    updated_at: str


class ConversationPage(AnswerModel):
    conversations: list[ConversationItem]
    next_cursor: str | None


class HandOff(BodyModel):
    """Hand the conversation to another agent between turns: it answers from the next turn."""

    to: str = Field(pattern=NAME_PATTERN.removesuffix("$") + r"(@[0-9]{1,9})?$",
                    description="an agent you may use, by name or name@version (a newer "
                                "version of its own agent moves the conversation to it); the "
                                "agent the conversation started from takes it back")
    why: str = Field("", max_length=2000, description="recorded in the handoff event")
    input_filter: InputFilter = Field(
        "all", description="what history it sees: all, from the next turn (turn), "
                           "or all without earlier tool calls (no_tools)")
