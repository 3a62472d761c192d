"""/v1/tool-calls: the tenant's tool calls across all its conversations, a page at a time.

What a person's queue of approvals reads (`?status=pending&executor=human`): without it a
client would walk every conversation to find the calls waiting on someone.
"""
from __future__ import annotations

from flask import Blueprint, g

from agentq.api.tenant_tool_calls import ListTenantToolCalls, TenantToolCall, TenantToolCallPage
from agentq.core.events import ToolCallRecord
from agentq.web import present
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
    return present.dump(TenantToolCallPage(
        tool_calls=[_item(record) for record in page.rows], next_cursor=page.next_cursor,
    ))


def _item(record: ToolCallRecord) -> TenantToolCall:
    return TenantToolCall.model_validate({**record.to_json(), "conversation_id": record.conversation_id})


def _call_of(cursor: str) -> tuple[str, str]:
    """The (conversation id, call id) a cursor names (ListTenantToolCalls let only `a/b` in)."""
    conversation_id, _, call_id = cursor.partition("/")
    return conversation_id, call_id
