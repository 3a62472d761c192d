"""/v1/conversations/{id}/messages: a user message, appended now or queued in the inbox."""
from __future__ import annotations

from flask import Blueprint, g

from agentq.api.messages import MessageAnswer, MessageHeaders, PostMessage
from agentq.web import present
from agentq.web.operation import operation
from agentq.web.services import services

bp = Blueprint("messages", __name__, url_prefix="/v1/conversations")


@bp.post("/<id:conversation_id>/messages")
@operation("Send a user message", body=PostMessage, headers=MessageHeaders,
           answers={202: MessageAnswer}, errors=(409,))
def post(conversation_id: str, body: PostMessage, headers: MessageHeaders):
    """Write first, then send follow-ups (docs/design.md §2); the same key gets the same answer."""
    svc = services()
    answer, followups = svc.commands.post_message(  # a Conflict's details say the state
        conversation_id, body.content, g.scope, on_busy=body.on_busy,
        idempotency_key=headers.idempotency_key, created_at=body.created_at,
    )
    if followups and not answer.queued:
        svc.announce(conversation_id)
    svc.dispatch(followups)
    return present.dump(MessageAnswer(**answer.to_json())), 202
