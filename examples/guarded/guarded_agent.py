"""A support agent with guardrails, instructions written from the acting user, and a
billing agent it hands billing questions to.

- `no_card_numbers` (input): a message that holds a card number never reaches the model.
- `no_jailbreak` (input, parallel): runs beside the first model call; a trip hangs it up.
- `on_topic` (output): an answer that names a competitor fails the turn instead of reaching
  the customer's log.
- `support_instructions`: the system prompt, written for whoever the turn acts for.
- `billing`: the agent `guarded_support` hands off to (`transfer_to_billing`); it holds the
  conversation from then on, with its own instructions and its own tool, `refund_status`.
  Later turns run billing's settings, not support's: it keeps card numbers out itself.

List this module in AGENTQ_TOOLS (with its folder on PYTHONPATH) and start conversations
from the agent `guarded_support`. Both agents answer from a script unless OPENAI_API_KEY is
set: support's says where the order is; billing's looks the refund up, then answers.
"""
from __future__ import annotations

import os
import re

import agentq

REFUNDS = {"1001": {"status": "paid", "amount": 89.0, "paid_on": "2026-11-20"}}
CARD = re.compile(r"\b(?:\d[ -]?){13,16}\b")


@agentq.guardrail
def no_card_numbers(text: str) -> agentq.GuardrailVerdict:
    """Trips on anything that looks like a payment card number."""
    found = CARD.search(text)
    return agentq.GuardrailVerdict(tripped=bool(found), info={"pii": "card"} if found else None)


@agentq.guardrail(parallel=True)
def no_jailbreak(text: str, ctx: agentq.GuardrailContext) -> agentq.GuardrailVerdict:
    """Trips on the oldest trick; reads who asked, for the record."""
    tripped = "ignore previous instructions" in text.lower()
    return agentq.GuardrailVerdict(tripped=tripped, info={"user": ctx.scope.user} if tripped else None)


@agentq.guardrail
def on_topic(answer: str) -> bool:
    """Trips on an answer that sends the customer to a competitor."""
    return "megastore" in answer.lower()


@agentq.instructions
def support_instructions(ctx: agentq.InstructionsContext) -> str:
    """The system prompt, for the user the turn acts for."""
    who = ctx.scope.user or "a back-office process"
    return (f"You are the support agent of {ctx.tenant}'s shop, talking to {who}. "
            "Never ask for card numbers. Answer about orders; hand refunds and charges "
            "over to billing.")


@agentq.tool
def refund_status(order_id: str) -> dict:
    """The refund of an order: paid or not, how much, and when."""
    return REFUNDS.get(order_id, {"status": "none"})


@agentq.instructions
def billing_instructions(ctx: agentq.InstructionsContext) -> str:
    """Billing's own system prompt, for the same acting user."""
    who = ctx.scope.user or "a back-office process"
    return (f"You are the billing desk of {ctx.tenant}'s shop, talking to {who}. "
            "Look a refund up with refund_status before you say anything about it.")


# A script answers by the conversation's round: billing's first is round 1 (support's
# transfer was round 0), so each turn it holds is a look-up (odd rounds), then the answer.
BILLING_SCRIPT = [
    {"text": "Your refund of 89.00 for order 1001 was paid on 2026-11-20.", "chunks": 3},
    {"tool_calls": [{"name": "refund_status", "args": {"order_id": "1001"}}]},
]


def model_of(script: list[dict], **scripted) -> dict:
    """A real model when OPENAI_API_KEY is set, else the script."""
    if os.environ.get("OPENAI_API_KEY"):
        return {"profile": "openai", "model": os.environ.get("SUPPORT_MODEL", "gpt-4.1-mini")}
    return {"profile": "scripted", "script": script, **scripted}


billing = agentq.agent(
    "billing", description="Refunds, invoices and charges.", system=billing_instructions,
    tools=[refund_status], input_guardrails=[no_card_numbers], temperature=0.0,
    limits={"max_rounds_per_turn": 6},
    **model_of(BILLING_SCRIPT, script_repeat=True),
)

guarded_support = agentq.agent(
    "guarded_support", description="Answers about orders, within guardrails.",
    system=support_instructions, input_guardrails=[no_card_numbers, no_jailbreak],
    output_guardrails=[on_topic], handoffs=[billing], temperature=0.2,
    limits={"max_rounds_per_turn": 6}, overridable=["script"],  # a conversation may play its own
    **model_of([{"text": "Your order ships tomorrow.", "chunks": 3}]),
)
