"""Tools a model may call: the @tool decorator, their registry, the context a call runs with."""
from agentq.core.scope import SYSTEM_SCOPE, Scope
from agentq.tools.registry import (
    Registry,
    Tool,
    ToolArgsError,
    ToolContext,
    ToolDefinitionError,
    ToolOutcome,
    jsonable,
    tool,
)

__all__ = ["SYSTEM_SCOPE", "Registry", "Scope", "Tool", "ToolArgsError", "ToolContext",
           "ToolDefinitionError", "ToolOutcome", "jsonable", "tool"]
