"""A soft threshold's budget call through the API, as the page and the SDK see it: listed
among the conversation's pending calls and the tenant's, with what was spent and the
limit, and answered like any human call."""
from __future__ import annotations

from decimal import Decimal

from agentq.tenancy.policy import Budgets, Policy
from agentq.tenancy.prices import ModelPrice
from tests.support.api import WEATHER, Api


def asking_api(store) -> Api:
    return Api(store, policy=Policy(
        profiles=Policy.default().profiles,
        prices={"scripted": ModelPrice(input=Decimal("1.5"), output=Decimal(6))},
        budgets=Budgets(cost_per_day="0.001", ask_at_percent=1)))


def waiting(api, alice):
    cid = api.create(alice, script=WEATHER)
    assert api.say(cid, "weather?", alice).status_code == 202
    api.run()
    return cid


def test_the_budget_call_is_listed_with_the_spend_and_the_limit(store):
    api = asking_api(store)
    alice = api.key("acme", "alice")
    cid = waiting(api, alice)
    state = api.get(f"/v1/conversations/{cid}", alice).json
    assert state["state"] == "awaiting_input"
    (pending,) = state["pending"]
    assert pending["name"] == "budget" and pending["executor"] == "human"
    assert pending["args"]["limit"] == "0.001000000" and pending["args"]["unit"] == "cost"
    listed = api.get("/v1/tool-calls", alice).json
    (budget,) = [c for c in listed["tool_calls"] if c["tool_call_id"] == pending["tool_call_id"]]
    assert budget["status"] == "pending" and budget["args"]["scope"] == "tenant"


def test_approving_the_budget_call_through_the_api_lets_the_turn_finish(store):
    api = asking_api(store)
    alice = api.key("acme", "alice")
    cid = waiting(api, alice)
    (pending,) = api.get(f"/v1/conversations/{cid}", alice).json["pending"]
    path = f"/v1/conversations/{cid}/tool-calls/{pending['tool_call_id']}/resolution"
    answer = api.client.post(path, json={"status": "approved"}, headers=alice)
    assert answer.status_code == 200, answer.json
    api.run()
    assert api.get(f"/v1/conversations/{cid}", alice).json["state"] == "idle"
    assert api.types(cid)[-1] == "assistant_msg"


def test_another_tenant_cannot_see_or_answer_the_budget_call(store):
    api = asking_api(store)
    alice, mallory = api.key("acme", "alice"), api.key("evil", "mallory")
    cid = waiting(api, alice)
    (pending,) = api.get(f"/v1/conversations/{cid}", alice).json["pending"]
    path = f"/v1/conversations/{cid}/tool-calls/{pending['tool_call_id']}/resolution"
    assert api.client.post(path, json={"status": "approved"}, headers=mallory).status_code == 404
    assert api.get("/v1/tool-calls", mallory).json["tool_calls"] == []  # none of theirs
    assert api.get(f"/v1/conversations/{cid}", alice).json["state"] == "awaiting_input"
