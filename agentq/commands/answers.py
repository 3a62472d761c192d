"""A person's answer to what a tool server asked mid-call (MCP elicitation).

The answer is checked against the JSON Schema the server asked for before anything is
written: an answer that does not fit is refused with what is wrong, and the call keeps
waiting. An accepted, declined or cancelled answer is recorded (a `resolution`, and on
the call's row for the step that makes the call again) and the call runs again with it,
as a step of its own (agentq.core.elicitation).
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from agentq.core import drafts
from agentq.core.decide import Step
from agentq.core.deciders import Decider, signed
from agentq.core.elicitation import ACTIONS, ANSWERED
from agentq.core.events import ToolCallRecord
from agentq.errors import Conflict, InvalidInput
from agentq.followups import FollowUp, RunTool, Settled

MAX_ERRORS_SHOWN = 5


def answer_call(
    tx, call: ToolCallRecord, *, by: str, action: str, content: Any, now: datetime,
    decider: Decider | None = None,
) -> tuple[ToolCallRecord, list[FollowUp]]:
    """Record the answer and schedule the call's next attempt; the same answer twice is
    a no-op (inv. 5), a different one once answered is a Conflict."""
    record = call.elicitation or {}
    question = record.get("question") or {}
    if action not in ACTIONS:
        raise InvalidInput(f"action must be one of {', '.join(ACTIONS)}")
    if action != "accept" and content is not None:
        raise InvalidInput(f"an answer that says {action} carries no content")
    if action == "accept":
        content = _checked(question, content)
    answer = {"action": action, **({"content": content} if content is not None else {})}
    if call.status != "pending" or record.get("answer") is not None:
        if record.get("answer") == answer:
            return call, []
        raise Conflict(f"tool call {call.id} is already {call.status}")
    answered = int(record.get("answered", 0)) + 1
    if not tx.answer(call.id, elicitation={**record, "answer": answer, "answered": answered}):
        raise Conflict(f"tool call {call.id} is no longer pending")
    tx.append_and_fold(signed([drafts.answer(call, action, content, by=by, created_at=now)],
                              decider), now=now)
    updated = tx.load_call(call.id)
    step = Step.tool(call.conversation_id, call.id, answered)  # its own step (inv. 5)
    return updated, [RunTool(call.conversation_id, call.id, step.key, tool=call.name),
                     Settled(call.conversation_id, call.id, ANSWERED)]


def _checked(question: dict[str, Any], content: Any) -> Any:
    """The content of an accepted answer, if it fits what the server asked for."""
    if question.get("mode") == "url":
        if content is not None:
            raise InvalidInput("a question that sends the person to an address takes no "
                               "content: accept, decline or cancel")
        return None
    content = {} if content is None else content
    if not isinstance(content, dict):
        raise InvalidInput(f"content must be a JSON object, got {type(content).__name__}")
    import jsonschema  # with the mcp extra: only MCP servers ask questions

    schema = question.get("requested_schema") or {"type": "object"}
    try:
        validator = jsonschema.Draft202012Validator(schema)
        errors = sorted(validator.iter_errors(content), key=lambda e: list(e.path))
    except jsonschema.SchemaError:
        raise Conflict("the tool server asked with a schema that is not valid JSON Schema; "
                       "decline or cancel") from None
    if errors:
        shown = "; ".join(_describe(e) for e in errors[:MAX_ERRORS_SHOWN])
        raise InvalidInput(f"the answer does not fit the schema the tool server asked for: {shown}")
    return content


def _describe(error: Any) -> str:
    where = ".".join(str(part) for part in error.path)
    return f"{where}: {error.message}" if where else error.message
