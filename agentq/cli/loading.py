"""The tool modules as `agentq dev` and `agentq policy` both load them, and the lines that list
what those modules define and which tool servers the policy declares.

Both commands put the current directory first on sys.path before they import AGENTQ_TOOLS
(as `python -m` does), so a module beside the developer loads alike in each. A module that
does not import is said in one line naming it and the setting; only a failure of the
module's own code (it raised) shows its traceback, which is where the developer looks next.
"""
from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentq.agents import CodeAgents
from agentq.tenancy.policy import McpServer
from agentq.tools import Registry, ToolDefinitionError


@dataclass(frozen=True)
class Loaded:
    """What the modules of AGENTQ_TOOLS define."""

    registry: Registry
    agents: CodeAgents


def importable_here(cwd: str | None = None) -> None:
    """Put the current directory first on sys.path, as `python -m` does, so `AGENTQ_TOOLS`
    can name the modules beside the developer."""
    here = os.path.abspath(cwd or os.getcwd())
    if here not in (os.path.abspath(p or ".") for p in sys.path):
        sys.path.insert(0, here)


def load_tools(command: str, modules: Sequence[str]) -> Loaded | None:
    """The tools and agents of `modules`, imported from here; None once stderr says why."""
    importable_here()
    try:
        registry = Registry.from_modules(modules)
        return Loaded(registry, CodeAgents.from_modules(modules))
    except Exception as exc:  # noqa: BLE001 - the developer's module: say what failed
        print(f"agentq {command}: {load_failure(modules, exc)}", file=sys.stderr)
        if not isinstance(exc, (ModuleNotFoundError, ToolDefinitionError)):
            traceback.print_exc()
        return None


def load_failure(modules: Sequence[str], exc: BaseException) -> str:
    """What to tell a developer whose tool modules did not import."""
    if isinstance(exc, ModuleNotFoundError):
        return (f"cannot import {exc.name!r} (AGENTQ_TOOLS={','.join(modules)}) from "
                f"{os.getcwd()} or sys.path: is the module's file in this directory, or its "
                "package installed?")
    return f"loading the tool modules {', '.join(modules)} failed: {type(exc).__name__}: {exc}"


def tool_names(registry: Registry) -> list[str]:
    """Each tool, marked where a person or the client takes part in its calls:
    `ask (human)`, `refund (needs approval)`, `discount (may need approval)` (a rule decides)."""
    named = []
    for name in registry.names:
        tool = registry.get(name)
        if tool is None or (tool.executor == "server" and tool.needs_approval is False):
            named.append(name)
        elif tool.executor != "server":
            named.append(f"{name} ({tool.executor})")
        else:
            named.append(f"{name} ({'may need' if callable(tool.needs_approval) else 'needs'} approval)")
    return named


def server_names(servers: Mapping[str, McpServer]) -> list[str]:
    """Each MCP server the policy declares, as tenants name it in their tools, with where it
    runs and who may use it: `mcp:crm (https://…; tenants all)`."""
    return [f"mcp:{name} ({server.url or 'stdio: ' + ' '.join(server.command or ())}; "
            f"tenants {tenants_named(server.tenants)})" for name, server in servers.items()]


def tenants_named(tenants: Sequence[str] | None) -> str:
    """`all` (None: every tenant), the names, or `none` (an empty list)."""
    return "all" if tenants is None else ", ".join(tenants) or "none"
