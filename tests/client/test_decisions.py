"""The SDK's decisions against a real API and worker: an approval with edited arguments, and
a key without the deciders' role refused with Forbidden, nothing written (sync and async)."""
from __future__ import annotations

import pytest

from agentq.client import Client, Forbidden, InvalidRequest
from agentq.process.clock import utcnow
from agentq.store import Store

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]


def script(tool: str, args: dict) -> dict:
    return {"script": [{"text": "It needs your approval.", "tool_calls": [{"name": tool, "args": args}]},
                       {"text": "Done.", "chunks": 2}]}


@pytest.fixture(scope="module")
def finance_key(pg_url) -> str:
    """A key of tenant sdk (the stack's) with the role finance."""
    store = Store.open(pg_url)
    try:
        return store.keys.create("sdk", utcnow(), roles=("finance",))[1]
    finally:
        store.dispose()


def test_an_approval_with_edited_arguments_runs_the_tool_with_them(client):
    conversation = client.create_conversation(script("editable_refund", {"order": "o-9", "amount": 900}))
    turn = client.send(conversation.id, "refund order o-9")
    [call] = turn.wait(stop_for_input=True).pending
    approved = client.approve(conversation.id, call.tool_call_id, args={"order": "o-9", "amount": 90})
    assert approved.args == {"order": "o-9", "amount": 90}
    assert approved.model_args == {"order": "o-9", "amount": 900}
    done = turn.wait()
    outputs = [e.content["output"] for e in done.events if e.type == "tool_result"]
    assert done.state == "idle" and outputs == ["refunded 90.00 on order o-9"]


def test_edits_to_a_call_whose_tool_does_not_allow_them_are_an_invalid_request(client):
    conversation = client.create_conversation(script("issue_refund", {"order": "o-8", "amount": 800}))
    [call] = client.send(conversation.id, "refund order o-8").wait(stop_for_input=True).pending
    with pytest.raises(InvalidRequest) as refused:
        client.approve(conversation.id, call.tool_call_id, args={"order": "o-8", "amount": 8})
    assert refused.value.code == "not_editable"
    [still] = client.tool_calls(conversation.id, status="pending")
    assert still.args == {"order": "o-8", "amount": 800}


def test_a_key_without_the_role_is_forbidden_and_one_with_it_decides(client, stack, finance_key):
    conversation = client.create_conversation(script("finance_refund", {"order": "o-7", "amount": 70}))
    turn = client.send(conversation.id, "refund order o-7", user="alice")
    [call] = turn.wait(stop_for_input=True).pending
    with pytest.raises(Forbidden) as refused:
        client.approve(conversation.id, call.tool_call_id, user="bob")
    assert refused.value.status == 403 and "finance" in str(refused.value)
    [listed] = client.tool_calls(conversation.id, status="pending", user="bob")
    assert listed.may_decide is False and listed.deciders.roles == ["finance"]
    with Client(stack.url, finance_key) as finance:
        [mine] = finance.tool_calls(conversation.id, status="pending", user="bob")
        assert mine.may_decide is True
        finance.approve(conversation.id, call.tool_call_id, user="bob")
    done = turn.wait()
    assert done.state == "idle"
    assert [e.content["decider"]["user"] for e in done.events if e.type == "resolution"] == ["bob"]
