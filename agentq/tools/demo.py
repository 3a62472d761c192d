"""The built-in demo tools: offline and deterministic, for `agentq demo`, tests and benchmarks."""
from __future__ import annotations

import time
from typing import Annotated, Any

from pydantic import Field

from agentq.tools import ToolContext, tool

_WEATHER = {
    "oslo": "Oslo: 4°C, light snow, wind 3 m/s.",
    "paris": "Paris: 14°C, overcast, wind 4 m/s.",
    "tokyo": "Tokyo: 19°C, clear, wind 2 m/s.",
    "new york": "New York: 11°C, rain, wind 6 m/s.",
    "cairo": "Cairo: 29°C, sunny, wind 5 m/s.",
}


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return _WEATHER.get(city.strip().lower(), f"No weather report is available for {city}.")


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@tool(executor="human", expires_in=3600)
def approve_payment(amount: float, to: str) -> None:
    """Ask a person to approve a payment."""
    # Never runs in a worker: a person resolves the call through the API.


@tool
def noop() -> str:
    """Do nothing and answer "ok"."""
    return "ok"


@tool
def sleep(seconds: Annotated[float, Field(ge=0, le=60)]) -> str:
    """Wait for some seconds, then say so."""
    time.sleep(seconds)
    return f"slept {seconds:g}s"


@tool(requires_user_scope=True)
def whoami(ctx: ToolContext) -> dict[str, Any]:
    """The tenant and user this conversation acts for."""
    return {"tenant": ctx.scope.tenant, "user": ctx.scope.user}
