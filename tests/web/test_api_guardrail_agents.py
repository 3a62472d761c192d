"""Guardrails that are agents through the API: a tenant's agent names one of the agents it may
use as a guardrail; anything else is a 422 and nothing is stored."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.web.test_api_handoffs import agent, started

JUDGE = {"system": "Stop card numbers.", "script_repeat": True,
         "script": [{"text": '{"tripped": true, "reason": "a card number"}'}]}


def test_a_tenants_agent_guarded_by_another_of_its_agents_stops_the_turn_and_shows_its_cost(
        api, alice):
    assert agent(api, alice, "judge", **JUDGE) == 201
    assert agent(api, alice, "support", input_guardrails=["agent:judge"],
                 script=[{"text": "Your card is 4111."}]) == 201
    cid = started(api, alice, "support")
    assert api.say(cid, "what is my card number?", alice).status_code == 202
    api.run()
    events = api.get(f"/v1/conversations/{cid}/events", alice).json["events"]
    assert [e["type"] for e in events] == ["user_msg", "guardrail", "error"]
    assert events[1]["content"]["name"] == "agent:judge"
    assert events[1]["content"]["agent"] == {"name": "judge", "version": 1}
    assert events[2]["content"]["code"] == "guardrail_tripped"
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    usage = api.client.get("/v1/usage", headers=alice, query_string={
        "from": today.isoformat(), "to": (today + timedelta(days=1)).isoformat(), "by": "agent"})
    assert usage.status_code == 200, usage.json
    assert [row["group"]["agent"] for row in usage.json["rows"]] == ["judge"]


def test_an_agent_guarded_by_another_tenants_agent_is_422_and_not_stored(api, alice, mallory):
    assert agent(api, mallory, "mallorys", **JUDGE) == 201
    for field, ref in (("input_guardrails", "agent:mallorys"),
                       ("output_guardrails", {"agent": "nobody"})):
        response = api.client.post("/v1/agents", json={
            "name": "sneaky", "settings": {field: [ref]}}, headers=alice)
        assert response.status_code == 422, response.json
        assert response.json["error"]["code"] == "unknown_agent"
    assert api.get("/v1/agents/sneaky", alice).status_code == 404


def test_a_guardrail_ref_that_is_not_one_function_or_one_agent_is_422(api, alice):
    assert agent(api, alice, "judge", **JUDGE) == 201
    for field, ref in (("input_guardrails", {"name": "no_secrets", "agent": "judge"}),
                       ("input_guardrails", {"agent": "no spaces"}),
                       ("tool_input_guardrails", "agent:judge")):
        response = api.client.post("/v1/agents", json={
            "name": "odd", "settings": {field: [ref]}}, headers=alice)
        assert response.status_code == 422, (ref, response.json)
    assert api.get("/v1/agents/odd", alice).status_code == 404
