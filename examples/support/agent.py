"""The support agent, defined next to its tools: a real model when OPENAI_API_KEY is set
where the processes run, else a script that plays what a model would do for "refund
order 1001", so the example runs offline and in the tests."""
from __future__ import annotations

import os

from tools import lookup_order, refund

import agentq

SYSTEM = ("You are the support agent of a small shop. Look an order up before anything "
          "else. Offer a refund only for a delivered order, for at most its total, and ask "
          "for it with the refund tool: a person approves it. Tell the customer the outcome.")

SCRIPT = [
    {"text": "Let me look up order 1001. ",
     "tool_calls": [{"name": "lookup_order", "args": {"order_id": "1001"}}], "chunks": 3},
    {"text": "Your keyboard was delivered. I have asked for a refund of 89.00; "
             "someone from the back office will approve it. ",
     "tool_calls": [{"name": "refund", "args": {"order_id": "1001", "amount": 89.0,
                                                "reason": "the customer asked"}}], "chunks": 4},
    {"text": "The back office has answered your refund request. Anything else I can do?",
     "chunks": 4},
]

if os.environ.get("OPENAI_API_KEY"):
    model = {"profile": "openai", "model": os.environ.get("SUPPORT_MODEL", "gpt-4.1-mini")}
else:
    model = {"profile": "scripted", "script": SCRIPT}

support = agentq.agent("support", description="Looks orders up; refunds with a person's approval.",
                       system=SYSTEM, tools=[lookup_order, refund], **model)
