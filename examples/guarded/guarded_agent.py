"""A support agent with guardrails and instructions written from the acting user.

- `no_card_numbers` (input): a message that holds a card number never reaches the model.
- `no_jailbreak` (input, parallel): runs beside the first model call; a trip hangs it up.
- `on_topic` (output): an answer that names a competitor fails the turn instead of reaching
  the customer's log.
- `support_instructions`: the system prompt, written for whoever the turn acts for.

List this module in AGENTQ_TOOLS (with its folder on PYTHONPATH) and start conversations
from the agent `guarded_support`. It answers from a script unless OPENAI_API_KEY is set.
"""
from __future__ import annotations

import os
import re

import agentq

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
            "Never ask for card numbers. Answer about orders only.")


if os.environ.get("OPENAI_API_KEY"):
    model = {"profile": "openai", "model": os.environ.get("SUPPORT_MODEL", "gpt-4.1-mini")}
else:
    model = {"profile": "scripted", "script": [{"text": "Your order ships tomorrow.", "chunks": 3}]}

guarded_support = agentq.agent(
    "guarded_support", description="Answers about orders, within guardrails.",
    system=support_instructions, input_guardrails=[no_card_numbers, no_jailbreak],
    output_guardrails=[on_topic], temperature=0.2, limits={"max_rounds_per_turn": 6}, **model,
)
