"""The shapes of a conversation's calls (/v1/conversations/<id>/tool-calls): the calls, and
the answers a person or a client gives to a pending one."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, RootModel, StringConstraints

from agentq.api.common import AnswerModel, BodyModel, RequestModel
from agentq.core.events import CallStatus, Executor


class CallResult(BodyModel):
    """The answer to a pending human or client call."""

    status: Literal["resolved", "errored"]
    result: Any = None


class Decision(BodyModel):
    """A person's decision on a call that needs approval. An approved call runs with the
    arguments the model gave, which the person saw, or, when its tool is `editable`, with
    the `args` they edited (checked against the tool's schema)."""

    status: Literal["approved", "rejected"]
    reason: Annotated[str, StringConstraints(min_length=1, max_length=2000)] | None = Field(
        None, description="why a call was rejected; the model reads it")
    args: dict[str, Any] | None = Field(
        None, description="an approval's edited arguments, for a call whose tool is editable")


class Answer(BodyModel):
    """A person's answer to what a tool server asked mid-call (`elicitation` on the call):
    MCP's action, and for `accept` the content its `requested_schema` describes."""

    status: Literal["answered"]
    action: Literal["accept", "decline", "cancel"] = "accept"
    content: dict[str, Any] | None = Field(
        None, description="the answer, checked against the question's requested_schema")


class OutcomeAnswer(BodyModel):
    """What became of a call whose run was found started and unfinished (`outcome_unknown`
    on the call): it `ran` (with the `result` the model reads), it `did_not_run` (it runs
    now, once), or it is `abandoned` (the model reads that its outcome is unknown)."""

    status: Literal["ran", "did_not_run", "abandoned"]
    result: Any = None
    reason: Annotated[str, StringConstraints(min_length=1, max_length=2000)] | None = Field(
        None, description="why the call was abandoned; the model reads it")


class Resolution(RootModel[Annotated[CallResult | Decision | Answer | OutcomeAnswer,
                                     Field(discriminator="status")]]):
    """The answer to a pending call: a result, a decision on a call that needs approval, an
    answer to its tool server's question, or what became of a run whose outcome is unknown."""

    model_config = ConfigDict(frozen=True)


class ListToolCalls(RequestModel):
    status: CallStatus | None = None


class Question(AnswerModel):
    """What a tool server asked a person mid-call (MCP elicitation): a form to fill in
    (`requested_schema`, a JSON Schema) or an address to visit (`url`)."""

    mode: Literal["form", "url"]
    message: str
    requested_schema: dict[str, Any] | None = None
    url: str | None = None


class DecidersOut(AnswerModel):
    """Who may decide a call: a key with one of `roles`, or one of `users` (none named:
    any key of the tenant); `not_self`: not the user whose turn made it."""

    roles: list[str]
    users: list[str]
    not_self: bool
    description: str


class ToolCall(AnswerModel):
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
    # a `once` call's run found started and unfinished: started_at, worker, found_at, ran_s,
    # the tool's description, and once answered, the answer
    outcome_unknown: dict[str, Any] | None = None
    # approved with edited arguments: the model's (`args` holds the person's, which ran)
    model_args: dict[str, Any] | None = None
    editable: bool = False  # a person may edit its arguments before approving
    # a pending call: whether this request's key and user may decide it, and who may
    may_decide: bool | None = None
    deciders: DecidersOut | None = None


class CallContext(AnswerModel):
    """The context of a call, as `call.waiting` webhooks carry it."""

    conversation: dict[str, Any]
    call: dict[str, Any]
    context: dict[str, Any]


class ToolCallList(AnswerModel):
    tool_calls: list[ToolCall]
