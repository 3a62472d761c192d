"""The support agent's tools: look an order up; refund one, once a person approves."""
from __future__ import annotations

import json
import os

import agentq

ORDERS = {
    "1001": {"order_id": "1001", "item": "mechanical keyboard", "total": 89.0, "status": "delivered"},
    "1002": {"order_id": "1002", "item": "USB-C cable", "total": 12.5, "status": "shipped"},
}


@agentq.tool
def lookup_order(order_id: str) -> dict:
    """Find an order by its id: the item, its total and its status."""
    return ORDERS.get(order_id) or {"error": f"there is no order {order_id}"}


@agentq.tool(needs_approval=True)
def refund(order_id: str, amount: float, ctx: agentq.ToolContext) -> str:
    """Refund an order. A person approves each refund before it is paid."""
    # The payment is one line in a ledger file ($REFUNDS_LEDGER), keyed by the call's id.
    with open(os.environ.get("REFUNDS_LEDGER", "refunds.jsonl"), "a") as ledger:
        ledger.write(json.dumps({"call": ctx.tool_call_id, "order_id": order_id,
                                 "amount": amount}) + "\n")
    return f"refunded {amount:.2f} on order {order_id}"
