"""/v1/conversations: create, list, read and end conversations."""
from __future__ import annotations

from flask import Blueprint, g, url_for

from web import models, present
from web.operation import operation
from web.services import services

bp = Blueprint("conversations", __name__, url_prefix="/v1/conversations")

# A state filter on the list, as the store's two columns: status, and the machine's state.
_FILTERS = {
    "ended": ("ended", None),
    **{state: ("active", state) for state in ("idle", "running", "awaiting_input", "failed")},
}


@bp.post("")
@operation("Create a conversation", body=models.CreateConversation,
           answers={201: models.Conversation})
def create(body: models.CreateConversation):
    svc = services()
    info = svc.commands.create_conversation(g.scope, body.settings)
    answer = present.dump(present.conversation(svc.overview(info.id, g.scope)))
    location = url_for("conversations.read", conversation_id=info.id)
    return answer, 201, {"Location": location}


@bp.get("")
@operation("List conversations, oldest first, a page at a time", query=models.ListConversations,
           answers={200: models.ConversationPage})
def listing(query: models.ListConversations):
    status, state = _FILTERS.get(query.status or "", (None, None))
    found = services().store.list_conversations(
        tenant=g.scope.tenant, status=status, state=state, after_id=query.cursor,
        limit=query.limit + 1,
    )
    page = found[: query.limit]
    more = len(found) > query.limit
    return present.dump(models.ConversationPage(
        conversations=[present.conversation_item(info) for info in page],
        next_cursor=page[-1].id if more else None,
    ))


@bp.get("/<id:conversation_id>")
@operation("Read a conversation's state", answers={200: models.Conversation})
def read(conversation_id: str):
    svc = services()
    return present.dump(present.conversation(svc.overview(conversation_id, g.scope)))


@bp.delete("/<id:conversation_id>")
@operation("End a conversation; its log is kept", answers={200: models.Conversation})
def end(conversation_id: str):
    svc = services()
    svc.commands.end(conversation_id, g.scope)
    return present.dump(present.conversation(svc.overview(conversation_id, g.scope)))
