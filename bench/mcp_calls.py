"""What an MCP tool call costs over a local tool call, as a worker's tool step makes it.

Both go through `Registry.call` (the tool step's call): a local `@tool` on a worker thread,
and an MCP `tools/call` to the SDK's own server over Streamable HTTP on 127.0.0.1 (a new
connection per call, the call id in `_meta`). Reports latency per call (p50, p95) and CPU
seconds per call of the calling process and of the MCP server.

    python -m bench.mcp_calls [calls]
"""
from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from agentq.core.scope import Scope
from agentq.mcp.source import McpTools
from agentq.tenancy.policy import McpServer
from agentq.tools import Registry, ToolContext, tool
from bench.cpu import process_cpu_s

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "support" / "mcp_server.py"


@tool
def greet(name: str) -> str:
    """Say hello."""
    return f"Hello, {name}!"


def _measure(registry: Registry, name: str, calls: int, server_pid: int | None) -> dict[str, float]:
    ctx = ToolContext("call_0", "conv_bench", Scope(tenant="bench"))
    registry.call(name, {"name": "Ada"}, ctx, timeout_s=30, allowed=[name, "mcp:crm"])  # warm up
    latencies = []
    cpu0, server0 = process_cpu_s(os.getpid()), process_cpu_s(server_pid) if server_pid else 0.0
    for i in range(calls):
        ctx = ToolContext(f"call_{i}", "conv_bench", Scope(tenant="bench"))
        started = time.perf_counter()
        outcome = registry.call(name, {"name": "Ada"}, ctx, timeout_s=30, allowed=[name, "mcp:crm"])
        latencies.append(time.perf_counter() - started)
        assert outcome.status == "ok", outcome
    cpu = process_cpu_s(os.getpid()) - cpu0
    server = (process_cpu_s(server_pid) - server0) if server_pid else 0.0
    latencies.sort()
    return {"p50_ms": 1000 * statistics.median(latencies),
            "p95_ms": 1000 * latencies[int(0.95 * (len(latencies) - 1))],
            "client_cpu_ms": 1000 * cpu / calls, "server_cpu_ms": 1000 * server / calls}


def main(calls: int = 300) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(SERVER), "http", str(port)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        remote = McpTools("crm", McpServer(url=f"http://127.0.0.1:{port}/mcp", timeout_s=30))
        registry = Registry([greet], [remote])
        local = _measure(registry, "greet", calls, None)
        mcp = _measure(registry, "mcp__crm__greet", calls, proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)
    for label, row in (("local @tool", local), ("MCP over HTTP", mcp)):
        print(f"{label:14} p50 {row['p50_ms']:7.2f} ms  p95 {row['p95_ms']:7.2f} ms  "
              f"client CPU {row['client_cpu_ms']:6.2f} ms/call  "
              f"server CPU {row['server_cpu_ms']:6.2f} ms/call")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
