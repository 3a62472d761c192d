"""/v1/conversations/{id}/tool-calls: list calls, resolve a pending human or client call, and
approve or reject a call that needs approval."""
from __future__ import annotations

from flask import Blueprint, g

from agentq.api.tool_calls import CallContext, ListToolCalls, Resolution, ToolCall, ToolCallList
from agentq.core.events import ToolCallRecord
from agentq.errors import NotFound
from agentq.store import ConversationInfo
from agentq.web import present
from agentq.web.auth import decider
from agentq.web.operation import operation
from agentq.web.services import services
from agentq.webhooks import payloads

bp = Blueprint("tool_calls", __name__, url_prefix="/v1/conversations")


@bp.get("/<id:conversation_id>/tool-calls")
@operation("List the conversation's tool calls", query=ListToolCalls,
           answers={200: ToolCallList})
def listing(conversation_id: str, query: ListToolCalls):
    """Pending calls (`?status=pending`) include those of its sub-agents' conversations that
    wait for a person, each naming its conversation and agent: the parent's people answer
    them too."""
    svc = services()
    conversation = svc.conversation(conversation_id, g.scope)
    calls = [_shown(c, conversation) for c in svc.store.calls.list_of(conversation_id,
                                                                         status=query.status)]
    if query.status == "pending":
        calls.extend(_pending_below(conversation_id))
    return present.dump(ToolCallList(tool_calls=calls))


def _pending_below(conversation_id: str) -> list[ToolCall]:
    store = services().store
    found: list[ToolCall] = []
    for child in store.conversations.list_descendants(conversation_id):
        agent = child.agent.name if child.agent else None
        found.extend(_shown(call, child, conversation_id=child.id, agent=agent)
                     for call in store.calls.list_of(child.id, status="pending")
                     if call.executor != "agent")
    return found


def _shown(record: ToolCallRecord, conversation: ConversationInfo, **where: str | None) -> ToolCall:
    """A call as this request's key and user see it: whether they may decide it, and who may."""
    return present.decidable(present.tool_call(record, **where), record, conversation,
                             services().commands.deciding, decider())


@bp.get("/<id:conversation_id>/tool-calls/<id:call_id>/context")
@operation("What a person needs to decide on a call: the conversation's title, the message "
           "that started the turn, who it acts for, what the model said before the call, the "
           "tool's description and the turn's earlier calls", answers={200: CallContext})
def call_context(conversation_id: str, call_id: str):
    svc = services()
    svc.conversation(conversation_id, g.scope)
    call = svc.store.calls.load(conversation_id, call_id)
    if call is None or call.turn_id is None:
        raise NotFound(f"no tool call {call_id} in conversation {conversation_id}")
    turn = svc.store.overview.list_events_of_turn(conversation_id, call.turn_id)
    first = svc.store.overview.list_first_messages([conversation_id]).get(conversation_id)
    registry = svc.commands.registry

    def describe(name: str) -> str | None:
        tool = registry.get(name)
        return tool.description if tool is not None else None

    return present.dump(CallContext(
        conversation={"id": conversation_id, "title": payloads.title_of(first)},
        call=payloads.call_info(turn, call_id, describe),
        context=payloads.call_context(turn, call_id),
    ))


@bp.post("/<id:conversation_id>/tool-calls/<id:call_id>/resolution")
@operation("Resolve a pending call; the same answer twice is 200 both times",
           body=Resolution, answers={200: ToolCall}, errors=(403, 409))
def resolve(conversation_id: str, call_id: str, body: Resolution):
    """Idempotent on the tool_call_id: a different late answer is 409 with the call's status;
    a key or user the call's deciders do not name is 403, and nothing is written."""
    svc = services()
    answer = body.root
    record, followups = svc.commands.resolve(  # a Conflict's details say the call's status
        conversation_id, call_id, g.scope, status=answer.status,
        result=getattr(answer, "result", None), reason=getattr(answer, "reason", None),
        action=getattr(answer, "action", None), content=getattr(answer, "content", None),
        args=getattr(answer, "args", None), decider=decider(),
    )
    svc.announce(conversation_id)
    svc.dispatch(followups)
    return present.dump(present.tool_call(record))
