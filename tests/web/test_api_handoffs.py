"""Handoffs through the API: a tenant's agents name the agents they hand over to, a turn
passes the conversation on, and a person hands it back with POST .../handoff."""
from __future__ import annotations

from tests.support.api import SseReader, events_of


def agent(api, headers, name: str, **settings) -> int:
    return api.client.post("/v1/agents", json={"name": name, "settings": settings},
                           headers=headers).status_code


def support_and_billing(api, headers) -> None:
    assert agent(api, headers, "billing", system="You are billing.",
                 script=[{"text": "Refunded."}], script_repeat=True) == 201
    assert agent(api, headers, "support", system="You are support.", handoffs=["billing"],
                 script=[{"tool_calls": [{"name": "transfer_to_billing",
                                          "args": {"reason": "a refund"}}]}]) == 201


def started(api, headers, name: str) -> str:
    response = api.client.post("/v1/conversations", json={"agent": name}, headers=headers)
    assert response.status_code == 201, response.json
    return response.json["id"]


def test_a_tenants_agent_hands_the_turn_to_another_of_its_agents(api, alice):
    support_and_billing(api, alice)
    cid = started(api, alice, "support")
    assert api.say(cid, "I want my money back", alice).status_code == 202
    api.run()
    body = api.get(f"/v1/conversations/{cid}", alice).json
    assert body["held_by"] == {"name": "billing", "version": 1}
    assert body["agent"] == {"name": "support", "version": 1}
    assert body["settings"]["system"] == "You are billing."
    events = api.get(f"/v1/conversations/{cid}/events", alice).json["events"]
    (handoff,) = [e for e in events if e["type"] == "handoff"]
    assert (handoff["content"]["from"], handoff["content"]["to"], handoff["content"]["why"]) == (
        "support", "billing", "a refund")
    assert events[-1]["content"]["text"] == "Refunded."


def test_an_agent_naming_another_tenants_agent_as_a_handoff_is_422_and_not_stored(
        api, alice, mallory):
    assert agent(api, mallory, "mallorys") == 201
    response = api.client.post("/v1/agents", json={
        "name": "sneaky", "settings": {"handoffs": ["mallorys"]}}, headers=alice)
    assert response.status_code == 422
    assert response.json["error"]["code"] == "unknown_agent"
    assert api.get("/v1/agents/sneaky", alice).status_code == 404


def test_a_handoff_target_that_is_not_an_agent_name_is_422(api, alice):
    response = api.client.post("/v1/agents", json={
        "name": "odd", "settings": {"handoffs": [{"name": "no spaces allowed"}]}}, headers=alice)
    assert response.status_code == 422


def test_a_person_hands_the_conversation_back_and_the_next_turn_goes_to_it(api, alice):
    support_and_billing(api, alice)
    cid = started(api, alice, "support")
    api.say(cid, "refund please", alice)
    api.run()
    response = api.client.post(f"/v1/conversations/{cid}/handoff",
                               json={"to": "support", "why": "billing is done"}, headers=alice)
    assert response.status_code == 200, response.json
    assert response.json["held_by"] == {"name": "support", "version": 1}
    assert response.json["settings"]["system"] == "You are support."
    events = api.get(f"/v1/conversations/{cid}/events", alice).json["events"]
    assert events[-1]["type"] == "handoff"
    assert events[-1]["content"]["settings"] is None  # its own settings, with its overrides
    assert (events[-1]["content"]["by"], events[-1]["content"]["user"]) == ("person", "alice")


def test_handing_a_conversation_to_an_agent_the_tenant_may_not_use_is_422(api, alice, mallory):
    support_and_billing(api, alice)
    assert agent(api, mallory, "mallorys") == 201
    cid = started(api, alice, "support")
    response = api.client.post(f"/v1/conversations/{cid}/handoff", json={"to": "mallorys"},
                               headers=alice)
    assert response.status_code == 422 and response.json["error"]["code"] == "unknown_agent"
    assert "handoff" not in api.types(cid)


def test_another_tenant_cannot_hand_over_a_conversation(api, alice, mallory):
    support_and_billing(api, alice)
    cid = started(api, alice, "support")
    response = api.client.post(f"/v1/conversations/{cid}/handoff", json={"to": "billing"},
                               headers=mallory)
    assert response.status_code == 404
    assert "handoff" not in api.types(cid)


def test_handing_over_while_a_turn_runs_is_409(api, alice):
    support_and_billing(api, alice)
    cid = started(api, alice, "support")
    api.say(cid, "refund please", alice)  # the turn starts; no worker has run it yet
    response = api.client.post(f"/v1/conversations/{cid}/handoff", json={"to": "billing"},
                               headers=alice)
    assert response.status_code == 409 and response.json["error"]["code"] == "turn_running"


def test_the_stream_sends_the_handoff_event(api, alice):
    support_and_billing(api, alice)
    cid = started(api, alice, "support")
    api.say(cid, "refund please", alice)
    api.run()
    response = api.client.get(f"/v1/conversations/{cid}/stream", headers=alice,
                              query_string={"until_idle": 1}, buffered=False)
    events = events_of(SseReader(response).frames())
    assert [e["content"]["to"] for e in events if e["type"] == "handoff"] == ["billing"]


def test_a_conversation_is_moved_to_a_newer_version_of_its_agent_by_naming_it(api, alice):
    support_and_billing(api, alice)
    cid = started(api, alice, "support")
    assert api.client.post("/v1/agents/support/versions", json={
        "settings": {"system": "You are support, two."}}, headers=alice).status_code == 201
    response = api.client.post(f"/v1/conversations/{cid}/handoff",
                               json={"to": "support@2", "why": "v2 deployed"}, headers=alice)
    assert response.status_code == 200, response.json
    assert response.json["held_by"] == {"name": "support", "version": 2}
    assert response.json["agent"] == {"name": "support", "version": 1}
    assert response.json["settings"]["system"] == "You are support, two."
    handoff = api.get(f"/v1/conversations/{cid}/events", alice).json["events"][-1]
    assert (handoff["type"], handoff["content"]["version"]) == ("handoff", 2)


def test_moving_a_conversation_to_a_version_its_agent_does_not_have_is_422(api, alice):
    support_and_billing(api, alice)
    cid = started(api, alice, "support")
    for target, code in (("support@7", "unknown_agent"), ("support@0", "invalid_agent")):
        response = api.client.post(f"/v1/conversations/{cid}/handoff", json={"to": target},
                                   headers=alice)
        assert response.status_code == 422, response.json
        assert response.json["error"]["code"] == code
    assert "handoff" not in api.types(cid)
