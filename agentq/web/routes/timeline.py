"""/v1/conversations/{id}/turns/{turn_id}/timeline and /v1/conversations/{id}/tree: seeing a run.

A turn's timeline is built from a fixed number of reads, however many steps the turn took
(agentq.store.timeline); the tree is the conversation and everything under it. Both answer
404 for another tenant's conversation, as every read of a conversation does. The operator's
key (AGENTQ_OPERATOR_KEY) reads any tenant's turn timeline, the one its overview links to.
"""
from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from flask import Blueprint, g

from agentq.api.timeline import ConversationTree, TreeNodeOut, TurnTimeline
from agentq.core.prices import format_money
from agentq.core.timefmt import format_ts
from agentq.core.timeline import timeline
from agentq.errors import NotFound
from agentq.process.clock import utcnow
from agentq.web import present
from agentq.web.operation import operation
from agentq.web.routes.usage import tenant_or_operator
from agentq.web.services import services

bp = Blueprint("timeline", __name__, url_prefix="/v1/conversations")


@bp.get("/<id:conversation_id>/turns/<id:turn_id>/timeline")
@operation("A turn's timeline: each step with its attempts and waits, its calls, its model "
           "calls (the operator's key reads any tenant's)", answers={200: TurnTimeline},
           auth=tenant_or_operator)
def turn_timeline(conversation_id: str, turn_id: str):
    tenant = None if g.operator else g.scope.tenant
    found = services().store.timelines.load_turn(conversation_id, turn_id, tenant=tenant)
    if found is None:
        raise NotFound(f"no turn {turn_id} in conversation {conversation_id}")
    drawn = timeline(conversation_id, turn_id, found.events, found.steps, found.calls,
                     found.children, now=utcnow(), running=found.running)
    return present.dump(TurnTimeline.model_validate(_json(drawn)))


@bp.get("/<id:conversation_id>/tree")
@operation("The conversation's tree of sub-agents: each node's state, agent and tokens",
           answers={200: ConversationTree})
def tree(conversation_id: str):
    nodes = services().store.timelines.load_tree(conversation_id, tenant=g.scope.tenant)
    if nodes is None:
        raise NotFound(f"no conversation {conversation_id}")
    top = nodes[0].conversation.depth
    return present.dump(ConversationTree(conversation_id=conversation_id, nodes=[
        TreeNodeOut(
            id=node.conversation.id,
            parent_conversation_id=None if index == 0 or node.conversation.parent is None
            else node.conversation.parent.conversation_id,
            parent_call_id=None if index == 0 or node.conversation.parent is None
            else node.conversation.parent.tool_call_id,
            depth=node.conversation.depth - top, state=present.state_of(node.conversation),
            agent=None if node.conversation.agent is None else node.conversation.agent.name,
            input_tokens=node.input_tokens, output_tokens=node.output_tokens,
            model_calls=node.calls, cost=format_money(node.cost_nanos),
        ) for index, node in enumerate(nodes)]))


def _json(value: Any) -> Any:
    """The timeline's values as JSON, datetimes as the API writes them, all the way down
    (not `dataclasses.asdict`, whose deep copies took half of a long turn's read)."""
    if isinstance(value, datetime):
        return format_ts(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {name: _json(getattr(value, name)) for name in value.__dataclass_fields__}
    if isinstance(value, dict):
        return {key: _json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json(item) for item in value]
    return value
