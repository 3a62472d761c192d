"""/v1/conversations: create, list, read, end, cancel, retry, fork and hand over conversations."""
from __future__ import annotations

from flask import Blueprint, g, url_for

from agentq.api.conversations import (
    Conversation,
    ConversationPage,
    CreateConversation,
    Fork,
    HandOff,
    ListConversations,
)
from agentq.commands.handoffs import HandoffCommands
from agentq.web import present
from agentq.web.operation import operation
from agentq.web.pagination import page_of
from agentq.web.services import services
from agentq.webhooks import payloads

bp = Blueprint("conversations", __name__, url_prefix="/v1/conversations")

# A state filter on the list, as the store's two columns: status, and the machine's state.
_FILTERS = {
    "ended": ("ended", None),
    **{state: ("active", state) for state in ("idle", "running", "awaiting_input", "failed")},
}


@bp.post("")
@operation("Create a conversation", body=CreateConversation,
           answers={201: Conversation})
def create(body: CreateConversation):
    svc = services()
    info = svc.commands.create_conversation(g.scope, body.settings, agent=body.agent)
    answer = present.dump(present.conversation(svc.overview(info.id, g.scope)))
    location = url_for("conversations.read", conversation_id=info.id)
    return answer, 201, {"Location": location}


@bp.get("")
@operation("List conversations, oldest first, a page at a time", query=ListConversations,
           answers={200: ConversationPage})
def listing(query: ListConversations):
    status, state = _FILTERS.get(query.status or "", (None, None))
    store = services().store
    page = page_of(lambda limit: store.conversations.list_page(
        tenant=g.scope.tenant, status=status, state=state, after_id=query.cursor, limit=limit,
    ), query.limit, lambda info: info.id)
    titles = store.overview.list_first_messages([info.id for info in page.rows])
    return present.dump(ConversationPage(
        conversations=[present.conversation_item(info, payloads.title_of(titles.get(info.id)))
                       for info in page.rows],
        next_cursor=page.next_cursor,
    ))


@bp.get("/<id:conversation_id>")
@operation("Read a conversation's state", answers={200: Conversation})
def read(conversation_id: str):
    svc = services()
    return present.dump(present.conversation(svc.overview(conversation_id, g.scope)))


@bp.delete("/<id:conversation_id>")
@operation("End a conversation; its log is kept", answers={200: Conversation})
def end(conversation_id: str):
    svc = services()
    svc.commands.end(conversation_id, g.scope)
    return present.dump(present.conversation(svc.overview(conversation_id, g.scope)))


@bp.post("/<id:conversation_id>/cancel")
@operation("Interrupt the running turn: the stream is closed, open calls are cancelled",
           answers={200: Conversation}, errors=(409,))
def cancel(conversation_id: str):
    svc = services()
    followups = svc.commands.cancel(conversation_id, g.scope)
    return _after_write(svc, conversation_id, followups)


@bp.post("/<id:conversation_id>/retry")
@operation("Re-drive a failed conversation; the failure stays in the log",
           answers={200: Conversation}, errors=(409,))
def retry(conversation_id: str):
    svc = services()
    followups = svc.commands.retry(conversation_id, g.scope)
    return _after_write(svc, conversation_id, followups)


@bp.post("/<id:conversation_id>/fork")
@operation("Fork: a new conversation with this one's log up to a turn boundary",
           body=Fork, answers={201: Conversation}, errors=(409,))
def fork(conversation_id: str, body: Fork):
    svc = services()
    info = svc.commands.fork(conversation_id, g.scope, at_seq=body.at_seq)
    answer = present.dump(present.conversation(svc.overview(info.id, g.scope)))
    return answer, 201, {"Location": url_for("conversations.read", conversation_id=info.id)}


@bp.post("/<id:conversation_id>/handoff")
@operation("Hand the conversation to another agent between turns: it answers from the next turn",
           body=HandOff, answers={200: Conversation}, errors=(409,))
def hand_off(conversation_id: str, body: HandOff):
    svc = services()
    HandoffCommands(svc.commands).hand_off(conversation_id, g.scope, to=body.to, why=body.why,
                                           input_filter=body.input_filter)
    return _after_write(svc, conversation_id, [])


def _after_write(svc, conversation_id: str, followups):
    """Tell live streams, send what comes next, answer with the conversation's state."""
    svc.announce(conversation_id)
    svc.dispatch(followups)
    return present.dump(present.conversation(svc.overview(conversation_id, g.scope)))
