"""An agent defined in code for the terminal's tests: a refund above 100 waits for a
person's approval (the demo tool `refund_order`)."""
from __future__ import annotations

import agentq

refunds = agentq.agent(
    "refunds",
    system="You refund orders.",
    tools=["refund_order"],
    script=[
        {"text": "Refunding 150 EUR on A-17 needs your approval.", "chunks": 3, "delay_s": 0.2,
         "tool_calls": [{"name": "refund_order", "args": {"order": "A-17", "amount": 150}}]},
        {"text": "The refund is done.", "chunks": 3, "delay_s": 0.2},
    ],
)
