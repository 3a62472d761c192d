"""Tools a model may call: the @tool decorator, their registry, the context a call runs with."""
from agentq.core.scope import SYSTEM_SCOPE, Scope
from agentq.tools.context import ToolContext
from agentq.tools.definition import Tool, ToolArgsError, tool
from agentq.tools.guardrails import Guardrail, GuardrailContext, GuardrailVerdict, guardrail
from agentq.tools.instructions import Instructions, InstructionsContext, instructions
from agentq.tools.reconcile import CannotTell, DidNotRun, Ran
from agentq.tools.registry import Registry, ToolOutcome, jsonable
from agentq.tools.schema import ToolDefinitionError

__all__ = ["SYSTEM_SCOPE", "CannotTell", "DidNotRun", "Guardrail", "GuardrailContext",
           "GuardrailVerdict", "Instructions", "InstructionsContext", "Ran", "Registry", "Scope",
           "Tool", "ToolArgsError", "ToolContext", "ToolDefinitionError", "ToolOutcome",
           "guardrail", "instructions", "jsonable", "tool"]
