"""What an answer to a pending call does: the rules of `resolve`, as a pure classifier.

`resolution_request` checks the request alone, before anything is read;
`classify_resolution` takes the call as read under the conversation's lock and returns
one verdict: refuse the answer, change nothing (the same answer again, inv. 5), or one
write: answer the tool server's question, approve or reject a gated call, or close the
call with a result. The command writes what the verdict says.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from agentq.core import outcome_rules
from agentq.core.elicitation import ANSWERED
from agentq.core.events import ToolCallRecord
from agentq.core.once import ANSWERS as OUTCOME_ANSWERS
from agentq.core.outcome_rules import Abandon, RecordRan, Repeated, RunAgain
from agentq.core.refusal import Refusal
from agentq.core.subagents import AGENT_EXECUTOR, child_conversation_id

RESOLUTION_STATUSES = ("resolved", "errored")
DECISION_STATUSES = ("approved", "rejected")  # a person's answer to a gated call
STATUSES = RESOLUTION_STATUSES + DECISION_STATUSES + (ANSWERED,) + OUTCOME_ANSWERS
# What a person's approve / reject of a call means when the call waits on a question.
FROM_DECISION = {"approved": "accept", "rejected": "decline"}


@dataclass(frozen=True)
class ResolutionRequest:
    """An answer to the call `tool_call_id` of `conversation_id`, as posted."""

    conversation_id: str
    tool_call_id: str
    status: str
    result: Any = None
    reason: str | None = None
    action: str | None = None


@dataclass(frozen=True)
class Unchanged:
    """The call already took this very answer: nothing is written (inv. 5)."""

    call: ToolCallRecord


@dataclass(frozen=True)
class AnswerQuestion:
    """A person answers what the call's tool server asked, with MCP's `action`."""

    call: ToolCallRecord
    action: str


@dataclass(frozen=True)
class Approve:
    """A gated call runs, as the very call the person saw (with their `args`, if edited)."""

    call: ToolCallRecord
    args: dict[str, Any] | None = None  # the person's edited arguments (agentq.core.edits)


@dataclass(frozen=True)
class Reject:
    """A gated call never runs; the model reads the refusal and its `reason`."""

    call: ToolCallRecord
    reason: str | None


@dataclass(frozen=True)
class Close:
    """A pending call takes its result."""

    call: ToolCallRecord
    status: str
    result: Any


ResolutionVerdict = (Refusal | Unchanged | AnswerQuestion | Approve | Reject | Close
                     | RecordRan | RunAgain | Abandon)


def resolution_request(
    conversation_id: str, tool_call_id: str, *, status: str, result: Any = None,
    reason: str | None = None, action: str | None = None,
) -> ResolutionRequest | Refusal:
    """The request, or why its status is refused before the conversation is even read."""
    if status not in STATUSES:
        return Refusal.invalid(f"status must be one of {', '.join(STATUSES)}")
    return ResolutionRequest(conversation_id, tool_call_id, status, result, reason, action)


def classify_resolution(request: ResolutionRequest, call: ToolCallRecord | None) -> ResolutionVerdict:
    """What the answer does to the call, as a flat ladder of rules."""
    if call is None:
        return Refusal.not_found(f"no tool call {request.tool_call_id} in conversation "
                                 f"{request.conversation_id}")
    if call.executor == AGENT_EXECUTOR:
        return Refusal.conflict(
            f"tool call {call.id} is answered by its sub-agent's conversation "
            f"{child_conversation_id(request.conversation_id, call.id)}")
    if outcome_rules.concerns(request.status, call):  # a `once` call's unknown run
        found = outcome_rules.classify_outcome_answer(
            call, status=request.status, result=request.result, reason=request.reason)
        return Unchanged(found.call) if isinstance(found, Repeated) else found
    if call.elicitation is not None:
        return _answer_to_question(request, call)
    if request.status == ANSWERED:
        return Refusal.conflict(f"tool call {call.id} was asked no question: it takes "
                                f"{' or '.join(RESOLUTION_STATUSES + DECISION_STATUSES)}")
    answer = _decision_as_result(request, call)
    if isinstance(answer, Refusal):
        return answer
    if call.needs_approval or answer.status in DECISION_STATUSES:
        return _decision(answer, call)
    return _result(answer, call)


def _answer_to_question(request: ResolutionRequest, call: ToolCallRecord) -> ResolutionVerdict:
    """A call whose tool server asked a question takes an answer (approve and reject stand
    for accept and decline), never a result: its server gives that."""
    if request.status not in DECISION_STATUSES + (ANSWERED,):  # the server gives the result
        return Refusal.conflict(f"tool call {call.id} is run by its tool server: answer its "
                                f"question (status {ANSWERED}), it gives the result")
    if request.result is not None:
        return Refusal.invalid("an answer to a tool server's question carries `content`, not a result")
    return AnswerQuestion(call, request.action or FROM_DECISION.get(request.status, "accept"))


def _decision_as_result(request: ResolutionRequest, call: ToolCallRecord) -> ResolutionRequest | Refusal:
    """A yes or no to a person's call is its result, as the model reads it; any other
    request as it came."""
    if request.status not in DECISION_STATUSES or call.needs_approval or call.executor != "human":
        return request
    if request.result is not None:
        return Refusal.invalid("a decision carries no result: approve or reject, or "
                               "resolve the call with a result")
    return replace(request, status="resolved", result=_approval(request.status, request.reason),
                   reason=None)


def _decision(request: ResolutionRequest, call: ToolCallRecord) -> ResolutionVerdict:
    """A person's decision on a gated call: approved, it runs as that very call (same id,
    the arguments they saw); rejected, the model reads why and the tool never runs."""
    if not call.needs_approval:
        return late(f"tool call {call.id} needs no approval: it takes a result "
                     f"({' or '.join(RESOLUTION_STATUSES)})", call)
    if request.status not in DECISION_STATUSES:
        return late(f"tool call {call.id} waits for a decision: "
                     f"{' or '.join(DECISION_STATUSES)}, not a result", call)
    if request.result is not None:
        return Refusal.invalid("an approval carries no result: the call runs with the "
                               "arguments shown, or not at all")
    if request.status == "approved" and request.reason is not None:
        return Refusal.invalid("a reason goes with a rejection")
    if call.status != "pending":
        asked = (request.status, request.reason if request.status == "rejected" else None)
        if decided_as(call) == asked:
            return Unchanged(call)  # inv. 5: the same decision twice changes nothing
        return late(f"tool call {call.id} is already {call.status}", call)
    return Approve(call) if request.status == "approved" else Reject(call, request.reason)


def _result(request: ResolutionRequest, call: ToolCallRecord) -> ResolutionVerdict:
    """A result for a human or client call."""
    if request.reason is not None:
        return Refusal.invalid("a reason goes with a rejection of a call that needs approval")
    if call.status != "pending":
        if call.status == request.status and call.result == request.result:
            return Unchanged(call)  # inv. 5: a repeated resolution changes nothing
        return late(f"tool call {call.id} is already {call.status}", call)
    return Close(call, request.status, request.result)


def late(message: str, call: ToolCallRecord | None) -> Refusal:
    """An answer to a call that no longer takes it; the details say its status, as read
    under the lock."""
    return Refusal.conflict(message, details=None if call is None else {"status": call.status})



def decided_as(call: ToolCallRecord) -> tuple[str, str | None] | None:
    """The decision a closed gated call records: approved calls were scheduled to run."""
    if call.status in ("scheduled", "done"):
        return "approved", None
    if call.status == "rejected" and isinstance(call.result, dict):
        return "rejected", call.result.get("reason")
    return None


def _approval(status: str, reason: str | None) -> dict[str, Any]:
    """The result of a human call a person approved or rejected."""
    return {"approved": status == "approved", **({} if reason is None else {"reason": reason})}
