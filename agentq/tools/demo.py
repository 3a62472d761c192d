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


_ORDERS = {
    "A-17": {"order": "A-17", "item": "Espresso machine", "paid_eur": 129.90, "status": "delivered"},
    "B-2": {"order": "B-2", "item": "Milk jug", "paid_eur": 15.00, "status": "delivered"},
}


@tool
def lookup_order(order: str) -> dict[str, Any]:
    """Look an order up: what was bought, what was paid, where it is."""
    return _ORDERS.get(order.strip().upper(), {"order": order, "status": "unknown order"})


def _large_refund(args: dict[str, Any], scope: Any) -> bool:
    return args["amount"] > 100


@tool(needs_approval=_large_refund, expires_in=3600, editable=True)
def refund_order(order: str, amount: float, reason: str = "") -> str:
    """Refund an amount of an order to the customer. Refunds above 100 EUR wait for a person's
    approval, who may correct the amount before approving."""
    return f"refunded {amount:.2f} EUR on order {order}"
