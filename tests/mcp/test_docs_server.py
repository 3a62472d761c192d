"""docs/tools.md's MCP server, run as the page writes it (its ```python crm_server.py block) in
both forms: over Streamable HTTP on the port it is given, and over stdio, started by the
page's policy (its ```toml policy.toml block) from the worker's working directory."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentq.core.scope import Scope
from agentq.mcp import tool_servers
from agentq.tenancy.policy import McpServer, load_policy
from agentq.tools import Registry, ToolContext, ToolOutcome
from tests.support.mcp_servers import accepts, free_port
from tests.test_quickstart import block
from tests.support.processes import ROOT, stop, wait_for

pytestmark = pytest.mark.slow  # each test starts the page's server

PAGE = ROOT / "docs" / "tools.md"
ADA = {"customer": "Ada", "tier": "gold", "call_id": "call_7"}


@pytest.fixture
def project(tmp_path) -> Path:
    """A directory holding the page's server, as a developer's project would."""
    (tmp_path / "crm_server.py").write_text(block("python crm_server.py", PAGE))
    return tmp_path


def look_up_ada(config: McpServer) -> ToolOutcome:
    """List the server's tools and call `lookup` for Ada, as a worker would."""
    registry = Registry([], tool_servers({"crm": config}))
    assert [spec.name for spec in registry.specs(["mcp:crm"])] == ["mcp__crm__lookup",
                                                                    "mcp__crm__greet"]
    context = ToolContext("call_7", "conv_1", Scope(tenant="acme", user="alice"))
    return registry.call("mcp__crm__lookup", {"customer": "Ada"}, context, timeout_s=30,
                         allowed=["mcp:crm"])


def test_the_pages_server_answers_over_streamable_http_on_the_port_it_is_given(project):
    port = free_port()
    server = subprocess.Popen([sys.executable, "crm_server.py", str(port)], cwd=project,
                              start_new_session=True)
    try:
        wait_for(lambda: accepts(port), timeout_s=30, what="the page's server to listen")
        outcome = look_up_ada(McpServer(url=f"http://127.0.0.1:{port}/mcp", timeout_s=30))
    finally:
        stop(server)
    assert (outcome.status, outcome.output) == ("ok", ADA)


def test_the_pages_server_answers_over_stdio_started_by_the_pages_command(project, monkeypatch):
    (project / "policy.toml").write_text(block("toml policy.toml", PAGE))
    local = load_policy(str(project / "policy.toml")).mcp["local"]
    assert local.command == ("python", "crm_server.py")
    monkeypatch.chdir(project)  # the worker's working directory
    monkeypatch.setenv("CRM_TOKEN", "t0ken")  # its env names it
    outcome = look_up_ada(local)
    assert (outcome.status, outcome.output) == ("ok", ADA)
