"""/v1/tool-calls: the tenant's tool calls across all its conversations, a page at a time.

What a person's queue of approvals reads (`?status=pending&executor=human`): without it a
client would walk every conversation to find the calls waiting on someone.
"""
from __future__ import annotations

from flask import Blueprint, g

from agentq.api.tenant_tool_calls import ListTenantToolCalls, TenantToolCall, TenantToolCallPage
from agentq.core.events import ToolCallRecord
from agentq.store import ConversationInfo
from agentq.web import present
from agentq.web.auth import decider
from agentq.web.operation import operation
from agentq.web.pagination import page_of
from agentq.web.services import services

bp = Blueprint("tenant_tool_calls", __name__, url_prefix="/v1/tool-calls")

@bp.get("")
@operation("List the tenant's tool calls across its conversations, oldest first",
           query=ListTenantToolCalls, answers={200: TenantToolCallPage})
def listing(query: ListTenantToolCalls):
    after = None if query.cursor is None else _call_of(query.cursor)
    store = services().store
    page = page_of(lambda limit: store.overview.list_tenant_calls(
        tenant=g.scope.tenant, status=query.status, executor=query.executor,
        after=after, limit=limit,
    ), query.limit, lambda record: f"{record.conversation_id}/{record.id}")
    conversations = _conversations_of(page.rows)
    return present.dump(TenantToolCallPage(
        tool_calls=[_item(record, conversations) for record in page.rows],
        next_cursor=page.next_cursor,
    ))


def _conversations_of(records: list[ToolCallRecord]) -> dict[str, ConversationInfo]:
    """The conversations of a page's calls, each read once (who decides needs its turn)."""
    store = services().store
    found = {cid: store.conversations.load(cid, tenant=g.scope.tenant)
             for cid in dict.fromkeys(record.conversation_id for record in records)}
    return {cid: info for cid, info in found.items() if info is not None}


def _item(record: ToolCallRecord, conversations: dict[str, ConversationInfo]) -> TenantToolCall:
    """A call with whether this request's key and user may decide it, and who may."""
    item = TenantToolCall.model_validate({**record.to_json(), "conversation_id": record.conversation_id})
    conversation = conversations.get(record.conversation_id)
    if conversation is None:
        return item
    return present.decidable(item, record, conversation, services().commands.deciding, decider())


def _call_of(cursor: str) -> tuple[str, str]:
    """The (conversation id, call id) a cursor names (ListTenantToolCalls let only `a/b` in)."""
    conversation_id, _, call_id = cursor.partition("/")
    return conversation_id, call_id
