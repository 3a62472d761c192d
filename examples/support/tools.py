"""The support agent's tools: look an order up; ask a person to approve a refund."""
from __future__ import annotations

import shop

import agentq


@agentq.tool
def lookup_order(order_id: str) -> dict:
    """Find an order by its id: the item, its total, its status, and any refund already paid."""
    order = shop.find_order(order_id)
    if order is None:
        return {"error": f"there is no order {order_id}"}
    return order


@agentq.tool(executor="human", expires_in=24 * 3600)
def refund(order_id: str, amount: float, reason: str) -> None:
    """Refund an order. A person in the back office approves (and pays) or rejects it."""
    # Never runs: the back office answers the call through the API (app.py review).
