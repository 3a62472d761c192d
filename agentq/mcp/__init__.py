"""MCP servers as tool sources: the only package that speaks MCP (the official `mcp` SDK).

The SDK is the optional extra `agentq[mcp]`: it is imported only when the operator's policy
declares a server, so a deployment without one does not need it.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentq.mcp.source import McpTools
    from agentq.tenancy.policy import McpServer


def tool_servers(servers: Mapping[str, McpServer]) -> list[McpTools]:
    """A tool source per server the policy declares (`Policy.mcp`); none, no SDK import."""
    if not servers:
        return []
    from agentq.mcp.source import McpTools

    return [McpTools(name, config) for name, config in servers.items()]
