"""The code that settings name by name, checked when they are admitted: guardrails and instructions.

A tenant's settings (and its agents' versions) may name the guardrails and instructions
functions the operator's code registered, never send code; a name no process offers is
refused with a 422 that names it, and nothing is stored. (A guardrail that is an agent is
checked where sub-agents are: agentq.commands.conversations.)
"""
from __future__ import annotations

from agentq.core.settings import Settings
from agentq.errors import InvalidInput
from agentq.tools import Registry


def refuse_unknown_code(settings: Settings, registry: Registry) -> None:
    """InvalidInput if `settings` name a guardrail or instructions no module registered."""
    for field in ("input_guardrails", "output_guardrails", "tool_input_guardrails",
                  "tool_output_guardrails"):
        refs = getattr(settings, field) or ()
        unknown = registry.guardrails.unknown(ref.name for ref in refs if ref.name is not None)
        if unknown:
            details = [{"loc": ["settings", field], "msg": f"no guardrail {name}",
                        "type": "unknown_guardrail"} for name in unknown]
            offered = ", ".join(registry.guardrails.names) or "none"
            raise InvalidInput(f"settings.{field} names guardrails the operator does not offer: "
                               f"{', '.join(unknown)}; offered: {offered}",
                               code="unknown_guardrail", details=details)
    name = settings.instructions
    if name is not None and registry.instructions.get(name) is None:
        raise InvalidInput(f"settings.instructions names no instructions the operator offers: "
                           f"{name}", code="unknown_instructions",
                           details=[{"loc": ["settings", "instructions"], "msg": f"no {name}",
                                     "type": "unknown_instructions"}])
