"""Tools a model may call: the @tool decorator, their registry, the context a call runs with."""
from agentq.core.scope import SYSTEM_SCOPE, Scope
from agentq.tools.context import ToolContext
from agentq.tools.definition import Tool, ToolArgsError, tool
from agentq.tools.reconcile import CannotTell, DidNotRun, Ran
from agentq.tools.registry import Registry, ToolOutcome, jsonable
from agentq.tools.schema import ToolDefinitionError

__all__ = ["SYSTEM_SCOPE", "Registry", "Scope", "Tool", "ToolArgsError", "ToolContext",
           "ToolDefinitionError", "ToolOutcome", "jsonable", "tool",
           "CannotTell", "DidNotRun", "Ran"]
