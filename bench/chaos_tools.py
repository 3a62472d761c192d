"""The tools of bench/chaos.py: each execution written down, so a call run twice is seen.

Every execution appends one line, `<tool_call_id> <tool> <pid> <unix time> start|done`, to the file named
by AGENTQ_CHAOS_LEDGER (one `write` on an O_APPEND descriptor: lines of several processes
never interleave, and a line written survives a SIGKILL right after it). The chaos run reads
the file at its end: a call started again while the process of its earlier execution was
still alive is a duplicate execution; one started again after that process was killed is
the at-least-once re-run docs/tools.md promises (the call's id is its idempotency key).
`chaos_once` is a `once` tool: any second start of one of its calls is a duplicated effect.
"""
from __future__ import annotations

import os
import time
from typing import Annotated

from pydantic import Field

from agentq.tools import ToolContext, tool


def _note(ctx: ToolContext, name: str, phase: str) -> None:
    path = os.environ.get("AGENTQ_CHAOS_LEDGER")
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{ctx.tool_call_id} {name} {os.getpid()} {time.time():.3f} {phase}\n".encode())
    finally:
        os.close(fd)


@tool
def chaos_lookup(ctx: ToolContext, key: str) -> str:
    """Look a key up (instantly)."""
    _note(ctx, "chaos_lookup", "start")
    _note(ctx, "chaos_lookup", "done")
    return f"value of {key}"


@tool
def chaos_slow(ctx: ToolContext, seconds: Annotated[float, Field(ge=0, le=30)]) -> str:
    """Work for some seconds, then answer."""
    _note(ctx, "chaos_slow", "start")
    time.sleep(seconds)
    _note(ctx, "chaos_slow", "done")
    return f"worked {seconds:g}s"


@tool(effect="once")
def chaos_once(ctx: ToolContext, seconds: Annotated[float, Field(ge=0, le=30)]) -> str:
    """Pay something, at its start, then take some seconds: must never run twice."""
    _note(ctx, "chaos_once", "start")
    time.sleep(seconds)
    _note(ctx, "chaos_once", "done")
    return f"paid after {seconds:g}s"
