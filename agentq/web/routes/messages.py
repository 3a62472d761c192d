"""/v1/conversations/{id}/messages: a user message, appended now or queued in the inbox."""
from __future__ import annotations

from flask import Blueprint, g

from agentq.errors import Conflict
from agentq.web import models, present
from agentq.web.errors import ApiError
from agentq.web.operation import operation
from agentq.web.services import services

bp = Blueprint("messages", __name__, url_prefix="/v1/conversations")


@bp.post("/<id:conversation_id>/messages")
@operation("Send a user message", body=models.PostMessage, headers=models.MessageHeaders,
           answers={202: models.MessageAnswer}, errors=(409,))
def post(conversation_id: str, body: models.PostMessage, headers: models.MessageHeaders):
    """Write first, then send follow-ups (docs/design.md §2); the same key gets the same answer."""
    svc = services()
    try:
        answer, followups = svc.commands.post_message(
            conversation_id, body.content, g.scope, on_busy=body.on_busy,
            idempotency_key=headers.idempotency_key, created_at=body.created_at,
        )
    except Conflict as exc:
        info = svc.conversation(conversation_id, g.scope)
        raise ApiError(409, exc.code, str(exc), {"state": present.state_of(info)}) from None
    if followups and not answer.queued:
        svc.announce(conversation_id)
    svc.dispatch(followups)
    return present.dump(models.MessageAnswer(**answer.to_json())), 202
