"""Sub-agents through the API: an agent offers others as tools, checked when it is defined."""
from __future__ import annotations

from datetime import timedelta

from tests.support.api import Api


def create(api: Api, headers, name: str, **settings):
    return api.client.post("/v1/agents", json={"name": name, "settings": settings},
                           headers=headers)


def test_an_agent_may_offer_another_of_the_tenant_as_a_tool(api, alice):
    assert create(api, alice, "researcher", script=[{"text": "found"}]).status_code == 201
    lead = create(api, alice, "lead", agents=["researcher", {
        "name": "researcher2", "description": "x"}])
    assert lead.status_code == 422 and lead.json["error"]["code"] == "unknown_agent"
    assert "researcher2" in lead.json["error"]["message"]
    lead = create(api, alice, "lead", agents=[{"name": "researcher", "description": "Finds."}])
    assert lead.status_code == 201, lead.json
    assert lead.json["settings"]["agents"] == [{"name": "researcher", "description": "Finds."}]


def test_an_agent_may_offer_itself_since_the_depth_ceiling_ends_the_cycle(api, alice):
    assert create(api, alice, "loop", agents=["loop"]).status_code == 201


def test_another_tenants_agent_is_unknown_to_a_conversations_settings(api, alice):
    assert create(api, alice, "researcher").status_code == 201
    other = api.key("globex", "bob")
    response = api.client.post("/v1/conversations", json={"settings": {"agents": ["researcher"]}},
                               headers=other)
    assert response.status_code == 422 and response.json["error"]["code"] == "unknown_agent"
    mine = api.client.post("/v1/conversations", json={"settings": {"agents": ["researcher"]}},
                           headers=alice)
    assert mine.status_code == 201, mine.json


def test_an_agent_tool_with_a_bad_name_or_schema_is_422(api, alice):
    for bad in ({"name": "has.dot"}, {"name": "x", "input_schema": {"type": "string"}},
                {"name": "x", "extra": 1}):
        response = api.client.post("/v1/conversations", json={"settings": {"agents": [bad]}},
                                   headers=alice)
        assert response.status_code == 422, bad


def test_a_parents_call_links_to_its_child_and_the_child_names_its_parent(api, alice):
    assert create(api, alice, "researcher", script=[{"text": "Oslo is rainy."}]).status_code == 201
    cid = api.create(alice, agents=["researcher"], script=[
        {"tool_calls": [{"name": "researcher", "args": {"input": "Oslo?"}}]}, {"text": "Rain."}])
    assert api.say(cid, "weather?", alice).status_code in (200, 201, 202)
    api.run()
    (call,) = api.get(f"/v1/conversations/{cid}/tool-calls", alice).json["tool_calls"]
    assert call["executor"] == "agent" and call["result"]["output"] == "Oslo is rainy."
    child = api.get(f"/v1/conversations/{call['child_conversation_id']}", alice).json
    assert child["parent"] == {"conversation_id": cid, "tool_call_id": call["tool_call_id"],
                               "depth": 1, "root_conversation_id": cid}
    assert child["agent"]["name"] == "researcher"
    assert api.get(f"/v1/conversations/{cid}", alice).json["parent"] is None
    day = api.clock().date()
    used = api.get(f"/v1/usage?from={day - timedelta(days=1)}T00:00:00Z"
                   f"&to={day + timedelta(days=2)}T00:00:00Z&by=root_conversation", alice)
    assert used.status_code == 200, used.json
    (tree,) = used.json["rows"]
    assert tree["group"] == {"root_conversation": cid} and tree["calls"] == 3


def test_the_next_request_offers_the_agents_as_tools_with_the_default_schema(api, alice):
    assert create(api, alice, "researcher").status_code == 201
    cid = api.create(alice, agents=[{"name": "researcher", "description": "Finds facts."}])
    shown = api.get(f"/v1/conversations/{cid}/context", alice)
    assert shown.status_code == 200, shown.json
    assert "Finds facts." in str(shown.json) and "'input'" in str(shown.json)
