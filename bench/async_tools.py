"""What awaiting an `async def` tool costs a call: `asyncio.run` per call (what agentq does,
agentq/tool_calls.py) against one event loop kept per thread, and a plain function call.

    .venv/bin/python bench/async_tools.py [calls]
"""
from __future__ import annotations

import asyncio
import sys
import time


async def tool() -> int:
    await asyncio.sleep(0)
    return 1


def per_call(calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        asyncio.run(tool())
    return (time.perf_counter() - started) / calls


def kept_loop(calls: int) -> float:
    loop = asyncio.new_event_loop()
    started = time.perf_counter()
    for _ in range(calls):
        loop.run_until_complete(tool())
    loop.close()
    return (time.perf_counter() - started) / calls


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    print(f"asyncio.run per call: {per_call(n) * 1e6:.0f} us; "
          f"one loop kept per thread: {kept_loop(n) * 1e6:.0f} us")
