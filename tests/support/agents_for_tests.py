"""Agents defined in code, as an application defines them next to its tools."""
from __future__ import annotations

import agentq
from tests.support.tools_for_tests import lookup

LOOKUP_SCRIPT = [
    {"text": "Looking it up.", "tool_calls": [{"name": "lookup", "args": {"key": "order-7"}}]},
    {"text": "Found it."},
]

support = agentq.agent(
    "support",
    description="Looks orders up.",
    system="You look orders up.",
    tools=[lookup],
    script=LOOKUP_SCRIPT,
    limits={"max_rounds_per_turn": 4},
    overridable=["system"],
)

concierge = agentq.agent("concierge", system="You are offered to some tenants only.")
