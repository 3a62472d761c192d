"""Builders for the drafts of each event type, so every writer spells content the same way.

The content shapes are docs/design.md §10's; the log is the API's contract, so they
live in one place.
"""
from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from agentq.core import once
from agentq.core.events import EventDraft, ToolCallRecord
from agentq.core.reasoning import Reasoning
from agentq.core.timefmt import format_ts


def user_msg(
    text: str, *, turn_id: str, message_id: str, scope: dict[str, Any], created_at: datetime,
    parts: Sequence[dict[str, Any]] = (), traceparent: str | None = None,
    unattended: dict[str, Any] | None = None,
) -> EventDraft:
    """Starts a turn; `scope` is who asked, so the turn's tools run on their behalf; `parts`
    are its text and images when it has more than text; `traceparent` is the trace the
    request that posted it was in, which the turn's steps join (only while tracing is on);
    `unattended` is the rule of a schedule's run for calls that wait for a person
    (agentq.core.schedules.unattended_deadline)."""
    content: dict[str, Any] = {"text": text, "message_id": message_id, "scope": scope}
    if parts:
        content["parts"] = list(parts)
    if traceparent:
        content["traceparent"] = traceparent
    if unattended:
        content["unattended"] = dict(unattended)
    return EventDraft("user_msg", content, created_at, turn_id=turn_id)


def assistant_msg(
    text: str,
    *,
    turn_id: str,
    round_id: str,
    step_key: str | None,
    created_at: datetime,
    interrupted: bool = False,
    usage: dict[str, Any] | None = None,
    reasoning: Sequence[Reasoning] = (),
    cost_nanos: int | None = None,
) -> EventDraft:
    """The answer text of a round; its reasoning items, verbatim, when the provider sent any;
    what the call cost, in nanos (agentq.core.prices), when its model is priced."""
    content: dict[str, Any] = {"text": text, "interrupted": interrupted}
    if usage:
        content["usage"] = usage
    if reasoning:
        content["reasoning"] = [item.as_content() for item in reasoning]
    if cost_nanos is not None:
        content["cost_nanos"] = cost_nanos
    return EventDraft("assistant_msg", content, created_at, turn_id, round_id, step_key)


def tool_call(
    call_id: str,
    name: str,
    args: dict[str, Any],
    *,
    executor: str,
    expires_at: datetime | None,
    turn_id: str,
    round_id: str,
    step_key: str,
    created_at: datetime,
    needs_approval: bool = False,
    child_conversation_id: str | None = None,
) -> EventDraft:
    """A call of the round; `needs_approval` marks a server call that waits for a person's
    decision on these exact arguments before it runs; `child_conversation_id` names the
    conversation that answers a sub-agent's call."""
    content: dict[str, Any] = {
        "tool_call_id": call_id,
        "name": name,
        "args": args,
        "executor": executor,
        "expires_at": None if expires_at is None else format_ts(expires_at),
        "needs_approval": needs_approval,
    }
    if child_conversation_id is not None:
        content["child_conversation_id"] = child_conversation_id
    return EventDraft("tool_call", content, created_at, turn_id, round_id, step_key)


def tool_result(
    call_id: str,
    status: str,
    output: Any,
    *,
    turn_id: str | None,
    round_id: str | None,
    step_key: str | None,
    created_at: datetime,
    parts: Sequence[dict[str, Any]] = (),
) -> EventDraft:
    """A call's result; `parts` are images it held (a tool server's), beside the output."""
    content: dict[str, Any] = {"tool_call_id": call_id, "status": status, "output": output}
    if parts:
        content["parts"] = list(parts)
    return EventDraft("tool_result", content, created_at, turn_id, round_id, step_key)


def suspension(
    pending: list[str], *, turn_id: str, round_id: str, step_key: str, created_at: datetime
) -> EventDraft:
    return EventDraft("suspension", {"pending": pending}, created_at, turn_id, round_id, step_key)


def question(
    call: ToolCallRecord, asked: dict[str, Any], *, expires_at: datetime, step_key: str,
    created_at: datetime,
) -> EventDraft:
    """The call's server asked a person something (MCP elicitation): the call waits for
    them. `asked` is what they are shown: the server's message and requested schema."""
    content = {"pending": [call.id], "elicitation": {
        **asked, "tool_call_id": call.id, "name": call.name, "expires_at": format_ts(expires_at)}}
    return EventDraft("suspension", content, created_at, call.turn_id, call.round_id, step_key)


def answer(
    call: ToolCallRecord, action: str, content: dict[str, Any] | None, *, by: str,
    created_at: datetime,
) -> EventDraft:
    """A person's answer to the call's server's question: the call runs again with it."""
    body: dict[str, Any] = {"tool_call_id": call.id, "status": "answered", "by": by,
                            "action": action}
    if content is not None:
        body["content"] = content
    return EventDraft("resolution", body, created_at, call.turn_id, call.round_id)


def resolution(
    call_id: str,
    status: str,
    by: str,
    *,
    turn_id: str | None,
    round_id: str | None,
    created_at: datetime,
    reason: str | None = None,
) -> EventDraft:
    content: dict[str, Any] = {"tool_call_id": call_id, "status": status, "by": by}
    if reason is not None:
        content["reason"] = reason
    return EventDraft("resolution", content, created_at, turn_id, round_id)


def approval(call: ToolCallRecord, *, by: str, created_at: datetime,
             args: dict[str, Any] | None = None) -> EventDraft:
    """A person approved a gated call: it runs next, with the arguments they saw, or with
    the `args` they edited (the log then keeps both, agentq.core.edits)."""
    draft = resolution(call.id, "approved", by, turn_id=call.turn_id, round_id=call.round_id,
                       created_at=created_at)
    if args is not None:
        draft.content.update(args=args, model_args=call.args)
    return draft


def refusal_text(reason: str | None) -> str:
    """What the model reads for a rejected call."""
    why = f": {reason}" if reason else " (no reason given)"
    return f"a person refused this call{why}. The tool did not run."


def rejection(
    call: ToolCallRecord, *, by: str, reason: str | None, created_at: datetime
) -> list[EventDraft]:
    """A person refused a gated call: its `rejected` result says why; the tool never runs."""
    return [
        resolution(call.id, "rejected", by, turn_id=call.turn_id, round_id=call.round_id,
                   created_at=created_at, reason=reason),
        tool_result(call.id, "rejected", refusal_text(reason), turn_id=call.turn_id,
                    round_id=call.round_id, step_key=None, created_at=created_at),
    ]


def closed_call(
    call: ToolCallRecord, status: str, output: Any, *, by: str, created_at: datetime
) -> list[EventDraft]:
    """A resolution of a pending call and the tool_result that closes it (inv. 3)."""
    result_status = {"resolved": "ok", "errored": "error"}.get(status, status)
    return [
        resolution(call.id, status, by, turn_id=call.turn_id, round_id=call.round_id,
                   created_at=created_at),
        tool_result(call.id, result_status, output, turn_id=call.turn_id,
                    round_id=call.round_id, step_key=None, created_at=created_at),
    ]


def error(
    code: str,
    message: str,
    *,
    status: str,
    step_key: str | None,
    turn_id: str | None,
    round_id: str | None,
    created_at: datetime,
    details: dict[str, Any] | None = None,
) -> EventDraft:
    content: dict[str, Any] = {"code": code, "message": message, "step_key": step_key,
                               "status": status}
    if details is not None:  # what a program needs to act on it (a spent budget's figures)
        content["details"] = details
    return EventDraft("error", content, created_at, turn_id, round_id, step_key)


def outcome_unknown(call: ToolCallRecord, mark: dict[str, Any], *, step_key: str | None,
                    created_at: datetime) -> EventDraft:
    """A `once` call's run was found started and unfinished: the call waits for a person to
    say what became of it (agentq.core.once)."""
    return EventDraft("suspension", once.suspension_content(call, mark), created_at,
                      call.turn_id, call.round_id, step_key)


def outcome_answer(call: ToolCallRecord, answer: str, *, by: str, created_at: datetime,
                   reason: str | None = None) -> EventDraft:
    """A person's answer to an outcome_unknown call: ran, did_not_run or abandoned."""
    return resolution(call.id, answer, by, turn_id=call.turn_id, round_id=call.round_id,
                      created_at=created_at, reason=reason)
