"""agentq: durable LLM-agent conversations on Celery, PostgreSQL and Flask.

The public surface: `agentq.tool`, `agentq.agent`, `agentq.FunctionModel`, … Each name is
imported when first used (PEP 562), so that `import agentq.client` loads the SDK and the
API's models only, not the agents, tools and providers these names come from
(tests/test_layering.py bounds what it loads). Type checkers read the imports below.
"""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentq.agents import Agent, agent, handoff
    from agentq.core.deciders import Deciders
    from agentq.core.scope import SYSTEM_SCOPE, Scope
    from agentq.errors import AgentqError, Conflict, InvalidInput, NotFound
    from agentq.providers.function import FunctionModel, ModelRequest, ToolResult
    from agentq.tools import (
        CannotTell,
        DidNotRun,
        GuardrailContext,
        GuardrailVerdict,
        InstructionsContext,
        Ran,
        Tool,
        ToolContext,
        guardrail,
        instructions,
        tool,
    )

# Each public name, by the module that defines it.
_HOMES = {
    "Agent": "agentq.agents", "agent": "agentq.agents",
    "SYSTEM_SCOPE": "agentq.core.scope", "Scope": "agentq.core.scope",
    "AgentqError": "agentq.errors", "Conflict": "agentq.errors", "InvalidInput": "agentq.errors",
    "NotFound": "agentq.errors",
    "FunctionModel": "agentq.providers.function", "ModelRequest": "agentq.providers.function",
    "ToolResult": "agentq.providers.function",
    "Tool": "agentq.tools", "ToolContext": "agentq.tools", "tool": "agentq.tools",
    "CannotTell": "agentq.tools.reconcile", "DidNotRun": "agentq.tools.reconcile",
    "Ran": "agentq.tools.reconcile",
    "Deciders": "agentq.core.deciders",
    "GuardrailContext": "agentq.tools", "GuardrailVerdict": "agentq.tools",
    "InstructionsContext": "agentq.tools", "guardrail": "agentq.tools",
    "instructions": "agentq.tools",
    "handoff": "agentq.agents",
}

__all__ = [
    "Agent", "AgentqError", "Conflict", "FunctionModel", "InvalidInput", "ModelRequest",
    "NotFound", "SYSTEM_SCOPE", "Scope", "Tool", "ToolContext", "ToolResult", "agent", "tool",
    "CannotTell", "DidNotRun", "Ran",
    "Deciders",
    "GuardrailContext", "GuardrailVerdict", "InstructionsContext", "guardrail", "instructions",
    "handoff",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and kept here after."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'agentq' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
