"""Tools a model may call: the @tool decorator, their registry, the context a call runs with."""
from agentq.tools.registry import (
    SYSTEM_SCOPE, Registry, Scope, Tool, ToolArgsError, ToolContext, ToolDefinitionError,
    ToolOutcome, jsonable, tool,
)

__all__ = ["SYSTEM_SCOPE", "Registry", "Scope", "Tool", "ToolArgsError", "ToolContext",
           "ToolDefinitionError", "ToolOutcome", "jsonable", "tool"]
