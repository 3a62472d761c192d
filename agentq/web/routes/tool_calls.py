"""/v1/conversations/{id}/tool-calls: list calls, and resolve a pending human or client call."""
from __future__ import annotations

from flask import Blueprint, g

from agentq.errors import Conflict
from agentq.web import models, present
from agentq.web.errors import ApiError
from agentq.web.operation import operation
from agentq.web.services import services

bp = Blueprint("tool_calls", __name__, url_prefix="/v1/conversations")


@bp.get("/<id:conversation_id>/tool-calls")
@operation("List the conversation's tool calls", query=models.ListToolCalls,
           answers={200: models.ToolCallList})
def listing(conversation_id: str, query: models.ListToolCalls):
    svc = services()
    svc.conversation(conversation_id, g.scope)
    calls = svc.store.list_tool_calls(conversation_id, status=query.status)
    return present.dump(models.ToolCallList(tool_calls=[present.tool_call(c) for c in calls]))


@bp.post("/<id:conversation_id>/tool-calls/<id:call_id>/resolution")
@operation("Resolve a pending call; the same answer twice is 200 both times",
           body=models.Resolution, answers={200: models.ToolCall}, errors=(409,))
def resolve(conversation_id: str, call_id: str, body: models.Resolution):
    """Idempotent on the tool_call_id: a different late answer is 409 with the call's status."""
    svc = services()
    try:
        record, followups = svc.commands.resolve(
            conversation_id, call_id, g.scope, status=body.status, result=body.result
        )
    except Conflict as exc:
        current = svc.store.load_tool_call(conversation_id, call_id)
        details = None if current is None else {"status": current.status}
        raise ApiError(409, exc.code, str(exc), details) from None
    svc.announce(conversation_id)
    svc.dispatch(followups)
    return present.dump(present.tool_call(record))
