"""Sub-agents through the API: an agent offers others as tools, checked when it is defined."""
from __future__ import annotations

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
