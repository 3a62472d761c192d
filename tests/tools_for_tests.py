"""Tools the runtime tests register: they count their calls, fail, or wait for a person."""
from __future__ import annotations

import threading

import agentq

CALLS: dict[str, int] = {}
_LOCK = threading.Lock()


def _count(name: str) -> None:
    with _LOCK:
        CALLS[name] = CALLS.get(name, 0) + 1


@agentq.tool
def lookup(key: str) -> str:
    """Look a key up; counts its calls."""
    _count(f"lookup:{key}")
    return f"value of {key}"


@agentq.tool
def explode() -> str:
    """Always fails."""
    raise RuntimeError("the tool exploded")


@agentq.tool(executor="human", expires_in=60)
def approve(amount: float) -> None:
    """Ask a person to approve an amount."""
