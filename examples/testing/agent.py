"""The support agent: a real model when OPENAI_API_KEY is set where agentq runs, else
`support_model`, a function that plays the model offline and reacts to what happened: what
the order lookup found, and whether the refund was approved, rejected or failed."""
from __future__ import annotations

import json
import os
import re

from tools import lookup_order, refund

import agentq

SYSTEM = ("You are the support agent of a small shop. Look an order up first. Refund only a "
          "delivered order, its whole total, with the refund tool: a person approves it. "
          "Tell the customer the outcome, and the reason of a refusal.")


def support_model(request: agentq.ModelRequest):
    """Look the order up, ask for its refund, then say how it went."""
    found = re.search(r"\b(\d{4})\b", request.text)
    if found is None:
        return "Which order? Please give me its number."
    order_id = found.group(1)
    refunded = request.result("refund")
    if refunded is not None:
        if refunded.status == "ok":
            return f"Done: {refunded.text}."
        return f"I could not refund order {order_id}: {refunded.text}"
    looked = request.result("lookup_order")
    if looked is None:
        return {"text": f"Let me look up order {order_id}. ", "chunks": 3,
                "tool_calls": [{"name": "lookup_order", "args": {"order_id": order_id}}]}
    order = json.loads(looked.text)
    if "error" in order:
        return f"I cannot find order {order_id}."
    if order["status"] != "delivered":
        return f"Order {order_id} is {order['status']}: it can be refunded once it is delivered."
    return {"text": f"I have asked for a refund of {order['total']:.2f}. ", "chunks": 3,
            "tool_calls": [{"name": "refund",
                            "args": {"order_id": order_id, "amount": order["total"]}}]}


if os.environ.get("OPENAI_API_KEY"):
    model = {"profile": "openai", "model": os.environ.get("SUPPORT_MODEL", "gpt-4.1-mini")}
else:
    model = {"model": support_model}

support = agentq.agent("support", description="Refunds delivered orders, with a person's approval.",
                       system=SYSTEM, tools=[lookup_order, refund], **model)
