"""/v1/conversations/{id}/context: the request the next model call would get, and its checks.

It plans the context exactly as a model step does (`render` repairs, oversized tool results
are shortened, and a context over budget that no compaction can cut is shortened to fit;
then `validate` and the provider's own wire check run), so a person can see what the
model will see, which summary stands for the earlier events, and what was left out:
"why did it forget X" has an answer here.
"""
from __future__ import annotations

import dataclasses

from flask import Blueprint, g

from agentq.api.context import Context, ContextValidation, Eviction, SummaryInUse
from agentq.core.budget import plan_context
from agentq.core.compaction import request_tokens
from agentq.core.handoffs import seen_by_holder
from agentq.core.render import check_anthropic, check_openai, to_anthropic, to_openai, validate
from agentq.core.responses_wire import check_responses, to_responses
from agentq.core.settings import FUNCTION_PROFILE
from agentq.errors import NotFound
from agentq.runtime.model_step import offered_specs
from agentq.web import present
from agentq.web.operation import operation
from agentq.web.services import services

# Each provider kind's wire shape and its own check; any other kind is shown as chat completions.
_WIRES = {"anthropic": (to_anthropic, check_anthropic), "openai_responses": (to_responses, check_responses)}

bp = Blueprint("context", __name__, url_prefix="/v1/conversations")


@bp.get("/<id:conversation_id>/context")
@operation("Show the next model request and its validation", answers={200: Context})
def context(conversation_id: str):
    svc = services()
    svc.conversation(conversation_id, g.scope)
    view = svc.store.log.load_view(conversation_id)
    if view is None:
        raise NotFound(f"no conversation {conversation_id}")
    problems: list[str] = []
    try:
        tools = offered_specs(svc.commands.registry, view.settings)  # sub-agents included
    except ValueError as exc:  # the deployment no longer offers a tool the settings name
        tools, problems = [], [str(exc)]
    try:  # a handoff's input filter too (one of the operator's code is not run here)
        seen = seen_by_holder(view)
    except ValueError as exc:
        seen, problems = view, [*problems, str(exc)]
    planned = plan_context(seen, tools)
    request, evictions = planned.request, planned.evictions
    profile = svc.policy.profiles.get(view.settings.profile)
    kind = profile.kind if profile is not None else None
    if view.settings.profile == FUNCTION_PROFILE:  # the operator's model function, no profile
        kind = FUNCTION_PROFILE
    to_wire, check_wire = _WIRES.get(kind or "", (to_openai, check_openai))
    wire = to_wire(request)
    problems += validate(request) + check_wire(wire)
    return present.dump(Context(
        profile=view.settings.profile,
        kind=kind,
        model=request.model,
        request=dataclasses.asdict(request),
        wire=wire,
        validation=ContextValidation(
            valid=not problems, problems=problems, repairs=list(request.repairs)
        ),
        summary=None if view.summary is None else SummaryInUse(
            from_seq=view.summary.from_seq, to_seq=view.summary.to_seq,
            version=view.summary.version, text=view.summary.content.get("text", ""),
        ),
        evictions=[Eviction(**eviction) for eviction in evictions],
        context_tokens=request_tokens(request),
    ))
