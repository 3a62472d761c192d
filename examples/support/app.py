"""The support application on agentq's SDK: a customer asks, the agent answers, and a
person in the back office approves (and pays) or rejects each refund the agent asks for.

    python app.py ask "I'd like a refund for order 1001"    # the customer's side
    python app.py review                                     # the back office's side

Both talk to the agentq API only (AGENTQ_API_URL, AGENTQ_API_KEY); the processes of agentq
load tools.py and agent.py (AGENTQ_TOOLS=tools,agent) and run the tools against the shop.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TextIO

import shop

from agentq.client import Client, EventOut, StreamDelta, TenantToolCall, TurnResult

# A decision on one refund: (approved, reason).
Decide = Callable[[TenantToolCall, dict | None], tuple[bool, str | None]]


def ask(client: Client, question: str, *, customer: str, out: TextIO = sys.stdout) -> TurnResult:
    """Start a conversation, send the question, print the answer as it streams."""
    conversation = client.create_conversation(agent="support", user=customer)
    out.write(f"(conversation {conversation.id})\n")
    turn = client.send(conversation.id, question, user=customer)
    events = []
    for item in turn.stream():
        if isinstance(item, StreamDelta):
            out.write(item.text)
        elif isinstance(item, EventOut):
            events.append(item)
            if item.type == "tool_call" and item.content["name"] == "refund":
                out.write("\n(waiting for the back office to approve the refund)\n")
            elif item.type == "tool_result" and item.content["tool_call_id"] in _refunds(events):
                out.write(f"(back office: {item.content['output']})\n")
        out.flush()
    out.write("\n")
    return turn.wait()  # the turn again, from the log: its events and answer


def review(client: Client, decide: Decide, *, reviewer: str, out: TextIO = sys.stdout) -> int:
    """Answer every refund waiting for a person; returns how many were answered.

    Approving pays the refund first, then answers the call with its id: if the answer is
    lost, reviewing again pays nothing twice (one refund per order) and answers the same.
    """
    answered = 0
    for call in client.pending_calls(executor="human", user=reviewer):  # page after page
        if call.name != "refund":
            continue
        order = shop.find_order(str(call.args.get("order_id")))
        approved, reason = decide(call, order)
        if approved:
            paid = shop.pay_refund(call.args["order_id"], float(call.args["amount"]))
            client.answer(call.conversation_id, call.tool_call_id,
                          {"approved": True, "refund_id": paid.refund_id, "amount": paid.amount},
                          user=reviewer)
            out.write(f"refunded {paid.amount:.2f} on order {paid.order_id} ({paid.refund_id})\n")
        else:
            client.reject(call.conversation_id, call.tool_call_id, reason, user=reviewer)
            out.write(f"rejected the refund of order {call.args.get('order_id')}: {reason}\n")
        answered += 1
    return answered


def by_the_rules(call: TenantToolCall, order: dict | None) -> tuple[bool, str | None]:
    """The shop's rule: a delivered order, not refunded yet, for at most its total."""
    amount = float(call.args.get("amount", 0))
    if order is None:
        return False, "there is no such order"
    if order["status"] != "delivered":
        return False, f"the order is {order['status']}, not delivered"
    if order["refund_id"] is not None:
        return False, "the order was refunded already"
    if not 0 < amount <= order["total"]:
        return False, f"a refund is at most the order's total, {order['total']:.2f}"
    return True, None


def ask_a_person(call: TenantToolCall, order: dict | None) -> tuple[bool, str | None]:
    """Show the request and the order; the person types y or n (and why not)."""
    print(f"refund {call.args} asked in conversation {call.conversation_id}; order: {order}")
    if input("approve? [y/n] ").strip().lower() in ("y", "yes"):
        return True, None
    return False, input("why not? ").strip() or None


def _refunds(events: list[EventOut]) -> set[str]:
    return {e.content["tool_call_id"] for e in events
            if e.type == "tool_call" and e.content["name"] == "refund"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="app.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    asking = sub.add_parser("ask", help="ask the support agent, as a customer")
    asking.add_argument("question")
    asking.add_argument("--customer", default="ada@example.com")
    reviewing = sub.add_parser("review", help="answer the refunds waiting, as the back office")
    reviewing.add_argument("--by-the-rules", action="store_true",
                           help="decide by the shop's rule instead of asking you")
    reviewing.add_argument("--reviewer", default="backoffice")
    args = parser.parse_args(argv)
    with Client() as client:
        if args.command == "ask":
            result = ask(client, args.question, customer=args.customer)
            return 0 if result.state != "failed" else 1
        decide = by_the_rules if args.by_the_rules else ask_a_person
        answered = review(client, decide, reviewer=args.reviewer)
        print(f"{answered} refund(s) answered")
        return 0


if __name__ == "__main__":
    sys.exit(main())
