"""Starting the tests' MCP server (tests/support/mcp_server.py) over Streamable HTTP."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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
