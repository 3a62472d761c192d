"""agentq: durable LLM-agent conversations on Celery, PostgreSQL and Flask."""
from agentq.agents import Agent, agent
from agentq.core.scope import SYSTEM_SCOPE, Scope
from agentq.errors import AgentqError, Conflict, InvalidInput, NotFound
from agentq.providers.function import FunctionModel, ModelRequest, ToolResult
from agentq.tools import Tool, ToolContext, tool

__all__ = [
    "Agent", "AgentqError", "Conflict", "FunctionModel", "InvalidInput", "ModelRequest",
    "NotFound", "SYSTEM_SCOPE", "Scope", "Tool", "ToolContext", "ToolResult", "agent", "tool",
]
