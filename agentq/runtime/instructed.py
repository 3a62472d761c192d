"""Instructions as code, in the model step: the system prompt a function writes for this conversation.

Evaluated each time the model step runs (who the turn acts for may change within a turn:
after an expiry it is the system), before the context is rendered, so the model is sent
exactly what the answer then records (agentq.core.guardrails.instructions_record).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from agentq.core.decide import current_turn
from agentq.core.events import EventDraft, View
from agentq.core.guardrails import instructions_record
from agentq.core.scope import SYSTEM_SCOPE, Scope
from agentq.tools import Registry
from agentq.tools.instructions import InstructionsContext


def instructed(registry: Registry, view: View) -> tuple[View, dict[str, Any] | None]:
    """`view` with the system prompt its settings' instructions write, and what its answer
    records of them; `view` as it is, and None, when the settings name none.

    Raises ValueError when the instructions are not registered or answer no text: the step
    fails as any step that raises (inv. 12), so the turn never runs without its instructions.
    """
    settings = view.settings
    if settings.instructions is None:
        return view, None
    scope = Scope.from_json(view.fsm.scope) if view.fsm.scope else SYSTEM_SCOPE
    ctx = InstructionsContext(view.conversation_id, view.tenant, scope, view.agent, settings.system)
    text = registry.instructions.text(settings.instructions, ctx)
    told = instructions_record(current_turn(view.events), settings.instructions, text)
    return replace(view, settings=settings.model_copy(update={"system": text})), told


def told(drafts: list[EventDraft], record: dict[str, Any] | None) -> list[EventDraft]:
    """The model step's drafts, its answer recording the instructions it was given."""
    if record is None:
        return drafts
    return [replace(d, content={**d.content, "instructions": record})
            if d.type == "assistant_msg" else d for d in drafts]
