"""The support agent's branches, tested offline: approved, the refund is paid once and the
customer told; rejected, nothing is paid and the customer hears the reason; an order not
yet delivered is not refunded, and nobody is asked."""
from __future__ import annotations

from agentq.client import Client, EventOut, Turn


def refund_to_decide(turn: Turn) -> str:
    """The id of the refund call the turn waits on, once it waits for a person."""
    for item in turn.stream():
        if isinstance(item, EventOut) and item.type == "tool_call" and item.content.get("needs_approval"):
            return item.content["tool_call_id"]
    raise AssertionError("the turn ended without asking for a refund")


def test_an_approved_refund_is_paid_once_and_the_customer_told(client: Client, paid):
    conversation = client.create_conversation(agent="support")
    turn = client.send(conversation.id, "Please refund my order 1001.")
    client.approve(conversation.id, refund_to_decide(turn))
    answer = turn.wait()
    assert answer.state == "idle"
    assert answer.text == "Done: refunded 89.00 on order 1001."
    assert paid() == [("1001", 89.0)]


def test_a_rejected_refund_is_not_paid_and_the_customer_hears_why(client: Client, paid):
    conversation = client.create_conversation(agent="support")
    turn = client.send(conversation.id, "Please refund my order 1001.")
    client.reject(conversation.id, refund_to_decide(turn), reason="it was bought 40 days ago")
    answer = turn.wait()
    assert answer.text == ("I could not refund order 1001: a person refused this call: "
                           "it was bought 40 days ago. The tool did not run.")
    assert paid() == []


def test_an_order_not_yet_delivered_is_not_refunded_and_nobody_is_asked(client: Client, paid):
    conversation = client.create_conversation(agent="support")
    answer = client.send(conversation.id, "Refund order 1002, please.").wait()
    assert answer.text == "Order 1002 is shipped: it can be refunded once it is delivered."
    assert [e.content["name"] for e in answer.events if e.type == "tool_call"] == ["lookup_order"]
    assert paid() == []
