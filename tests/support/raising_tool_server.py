"""Loaded as a tool module (AGENTQ_TOOLS) of a test's worker or of `agentq dev`: the MCP
server the policy names `broken` raises in the worker's event loop whenever its tools are
listed, as tests/support/raising_server.py's does in-process.

It goes through the source's own runner (`McpTools._run`: the event loop agentq gives tool
coroutines, a native thread under gevent), so the exception reaches the model step from
where a real one would.
"""
from __future__ import annotations

from typing import Any

from agentq.mcp.source import McpTools
from tests.support.raising_server import BROKEN, raising

_listed = McpTools._list


def _list(self: McpTools, limit_s: float) -> Any:
    if self.server != BROKEN:
        return _listed(self, limit_s)
    return self._run(lambda pipes: raising(), limit_s)


McpTools._list = _list  # type: ignore[method-assign]
