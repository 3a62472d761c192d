"""Starting the tests' MCP server (tests/support/mcp_server.py) over Streamable HTTP, and an
emulated model that uses a server's tools once it is offered them."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.emulators import ByRequest, Call, Reply
from tests.support.processes import ROOT, stop, wait_for

SERVER = ROOT / "tests" / "support" / "mcp_server.py"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def accepts(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def mcp_server(log_path: Path, call_log: Path, port: int | None = None) -> Iterator[str]:
    """The server's /mcp URL on 127.0.0.1 while the block runs; stopped by pid after it."""
    port = port or free_port()
    env = {**os.environ, "MCP_CALL_LOG": str(call_log)}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([sys.executable, str(SERVER), "http", str(port)], cwd=ROOT,
                                env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            wait_for(lambda: accepts(port), timeout_s=30, what="the MCP server to listen")
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            stop(proc)


def policy_text(url: str, tenants: str = '["acme"]', extra: str = "") -> str:
    """A policy declaring the server as `crm`, its token read from CRM_TOKEN."""
    return (f'[mcp.crm]\nurl = "{url}"\ntenants = {tenants}\ntimeout_s = 10\n'
            f'headers = {{Authorization = "env:CRM_TOKEN"}}\n{extra}')


def a_model_that_uses(tool: str, args: dict) -> ByRequest:
    """An emulated model that calls `tool` if it is offered it, then says what it answered;
    offered no such tool, it says what it was offered instead."""
    def choose(body: dict) -> Reply:
        answers = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        if answers:
            return Reply(text=f"The tool said: {answers[-1]}")
        offered = [t["function"]["name"] for t in body.get("tools") or ()]
        if tool in offered:
            return Reply(text="", calls=(Call(tool, args),))
        return Reply(text=f"I was offered {offered}")
    return ByRequest(choose)


def emulated_model_policy(base_url: str, servers: str) -> str:
    """A policy whose profile `emu` is the emulated model (its key in EMU_KEY), and `servers`."""
    return (f'[profiles.emu]\nkind = "openai"\nbase_url = "{base_url}"\nkey_env = "EMU_KEY"\n\n'
            f"{servers}")
