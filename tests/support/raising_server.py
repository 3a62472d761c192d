"""A tool server whose listing, or calls, raise in the worker's event loop (inv. 12 tests).

Its coroutines run on the loop agentq gives tool coroutines (agentq.tools.calls: a native
thread under gevent), and raise what gevent raised there for a stdio MCP server before
agentq started such servers from the calling thread: nothing the tool ladder expects.
"""
from __future__ import annotations

from typing import Any

from agentq.core.request import ToolSpec
from agentq.tools.calls import Coroutines
from agentq.tools.remote import Asked, RemoteResult

BROKEN = "broken"  # its name, in the settings as "mcp:broken"
CAUSE = "child watchers are only available on the default loop"
GREET = ToolSpec(name="greet", description="Say hello.",
                 parameters={"type": "object", "properties": {"name": {"type": "string"}}})


async def raising() -> Any:
    raise TypeError(CAUSE)


class RaisingServer:
    """A RemoteTools whose listing raises (`lists=False`), or whose calls do."""

    queue = None

    def __init__(self, *, lists: bool = False) -> None:
        self.server = BROKEN
        self.lists = lists
        self.listings = 0  # how often it was asked for its tools
        self.calls = 0
        self._loop = Coroutines()

    def listing(self) -> list[ToolSpec]:
        self.listings += 1
        if self.lists:
            return [GREET]
        return self._loop.run(raising(), 5.0)

    def call(self, tool: str, args: dict[str, Any], call_id: str, timeout_s: float,
             elicitation: dict[str, Any] | None = None) -> RemoteResult | Asked:
        self.calls += 1
        return self._loop.run(raising(), 5.0)
