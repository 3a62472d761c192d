"""The real MCP server a module of these tests talks to, and where it logs its calls."""
from __future__ import annotations

from pathlib import Path

import pytest

from agentq.tenancy.policy import Policy, load_policy
from tests.support.mcp_servers import mcp_server, policy_text


@pytest.fixture(scope="module")
def call_log(tmp_path_factory) -> Path:
    """Where the module's MCP server writes a line for each call of its logging tools."""
    path = tmp_path_factory.mktemp("mcp-calls") / "calls.log"
    path.touch()
    return path


@pytest.fixture(scope="module")
def mcp_url(tmp_path_factory, call_log) -> str:
    """A Streamable HTTP MCP server on 127.0.0.1, stopped by pid when the module ends."""
    with mcp_server(tmp_path_factory.mktemp("mcp") / "server.log", call_log) as url:
        yield url


@pytest.fixture
def policy(mcp_url, tmp_path) -> Policy:
    path = tmp_path / "policy.toml"
    path.write_text(policy_text(mcp_url))
    return load_policy(str(path))
