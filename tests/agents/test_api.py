"""/v1/agents and conversations started from agents, through the API on a real store."""
from __future__ import annotations

from pathlib import Path

import pytest

from agentq.tenancy.policy import load_policy
from tests.support.agents_for_tests import LOOKUP_SCRIPT
from tests.support.api import Api

SETTINGS = {"system": "You look orders up.", "tools": ["lookup"], "script": LOOKUP_SCRIPT}


def create(api: Api, headers, name: str = "support", **body):
    return api.client.post("/v1/agents", json={"name": name, "settings": SETTINGS, **body},
                           headers=headers)


def publish(api: Api, headers, name: str = "support", **body):
    return api.client.post(f"/v1/agents/{name}/versions", json={"settings": SETTINGS, **body},
                           headers=headers)


def start(api: Api, headers, agent: str, **settings):
    body = {"agent": agent, **({"settings": settings} if settings else {})}
    return api.client.post("/v1/conversations", json=body, headers=headers)


def error(response) -> str:
    return response.json["error"]["code"]


# ---- the agents of a tenant ---------------------------------------------------------------------


def test_a_new_agent_is_version_1_of_its_definition(api, alice):
    response = create(api, alice, description="Looks orders up.", overridable=["system"])
    assert response.status_code == 201, response.json
    agent = response.json
    assert response.headers["Location"] == "/v1/agents/support/versions/1"
    assert {k: agent[k] for k in ("name", "version", "source", "description", "overridable")} == {
        "name": "support", "version": 1, "source": "api", "description": "Looks orders up.",
        "overridable": ["system"]}
    assert agent["settings"] == SETTINGS  # as set: the unset fields stay unset
    assert len(agent["digest"]) == 64
    assert api.get("/v1/agents/support", alice).json == agent


def test_a_name_taken_is_409_and_the_agent_is_unchanged(api, alice):
    create(api, alice)
    again = create(api, alice, description="other")
    assert again.status_code == 409 and error(again) == "agent_exists"
    assert api.get("/v1/agents/support", alice).json["description"] == ""


def test_a_new_version_is_numbered_next_and_the_earlier_one_does_not_change(api, alice):
    first = create(api, alice).json
    second = publish(api, alice, settings={**SETTINGS, "system": "Be brief."})
    assert second.status_code == 201 and second.json["version"] == 2
    assert second.headers["Location"] == "/v1/agents/support/versions/2"
    assert api.get("/v1/agents/support", alice).json["version"] == 2
    assert api.get("/v1/agents/support/versions/1", alice).json == first
    assert api.get("/v1/agents/support/versions/3", alice).status_code == 404


def test_the_same_definition_published_again_has_the_same_digest(api, alice):
    first = create(api, alice).json
    again = publish(api, alice).json
    assert again["version"] == 2 and again["digest"] == first["digest"]


def test_a_version_of_an_agent_that_does_not_exist_is_404(api, alice):
    response = publish(api, alice, name="ghost")
    assert response.status_code == 404


def test_the_list_holds_the_latest_version_of_each_agent_by_name(api, alice):
    create(api, alice, name="support")
    create(api, alice, name="billing")
    publish(api, alice, name="support")
    listed = api.get("/v1/agents", alice).json["agents"]
    assert [(a["name"], a["version"]) for a in listed] == [("billing", 1), ("support", 2)]


def test_another_tenants_agent_is_404_everywhere_and_not_listed(api, alice, mallory):
    create(api, alice)
    assert api.get("/v1/agents/support", mallory).status_code == 404
    assert api.get("/v1/agents/support/versions/1", mallory).status_code == 404
    assert publish(api, mallory).status_code == 404
    assert api.get("/v1/agents", mallory).json == {"agents": [], "next_cursor": None}
    refused = start(api, mallory, "support")
    assert refused.status_code == 422 and error(refused) == "unknown_agent"
    assert create(api, mallory).status_code == 201  # its own "support" is another agent


# ---- hostile input ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "a b", "../x", "x" * 65, "support@2", "é"])
def test_a_name_outside_the_alphabet_or_too_long_is_422(api, alice, name):
    response = create(api, alice, name=name)
    assert response.status_code == 422 and error(response) == "validation_error"


@pytest.mark.parametrize("body", [
    {"description": "x" * 2001},
    {"overridable": ["base_url"]},
    {"settings": {"system": "hi", "base_url": "http://169.254.169.254"}},
    {"settings": {"api_key": "sk-abcdefghijklmnopqrstuvwxyz"}},
    {"version": 7},
])
def test_a_body_that_does_not_fit_the_model_is_422_and_nothing_is_stored(api, alice, body):
    response = api.client.post("/v1/agents", json={"name": "support", **body}, headers=alice)
    assert response.status_code == 422
    assert api.get("/v1/agents", alice).json == {"agents": [], "next_cursor": None}


def test_a_definition_larger_than_the_limit_is_422(api, alice):
    response = create(api, alice, settings={"system": "x" * 300_000})
    assert response.status_code == 422 and error(response) == "invalid_agent"
    assert "at most" in response.json["error"]["message"]


@pytest.mark.parametrize("settings, code", [
    ({"profile": "nowhere"}, "unknown_profile"),
    ({"limits": {"max_rounds_per_turn": 1000}}, "above_ceiling"),
    ({"tools": ["no_such_tool"]}, "unknown_tool"),
])
def test_settings_the_policy_would_refuse_a_conversation_are_refused_for_an_agent(
        api, alice, settings, code):
    response = create(api, alice, settings=settings)
    assert response.status_code == 422 and error(response) == code
    create(api, alice)
    assert publish(api, alice, settings=settings).status_code == 422
    assert api.get("/v1/agents/support", alice).json["version"] == 1


def test_a_path_name_no_agent_can_have_is_404(api, alice):
    assert api.get("/v1/agents/a..b@1", alice).status_code == 404


# ---- conversations from agents ------------------------------------------------------------------


def test_a_conversation_from_an_agent_runs_with_its_latest_version_pinned(api, alice):
    create(api, alice)
    response = start(api, alice, "support")
    assert response.status_code == 201, response.json
    conversation = response.json
    assert conversation["agent"] == {"name": "support", "version": 1}
    assert conversation["settings"]["system"] == "You look orders up."
    publish(api, alice, settings={**SETTINGS, "system": "Version two."})
    read = api.get(f"/v1/conversations/{conversation['id']}", alice).json
    assert read["agent"] == {"name": "support", "version": 1}
    assert read["settings"]["system"] == "You look orders up."
    assert start(api, alice, "support").json["agent"] == {"name": "support", "version": 2}
    listed = api.get("/v1/conversations", alice).json["conversations"]
    assert sorted(c["agent"]["version"] for c in listed) == [1, 2]


def test_a_conversation_can_name_an_earlier_version(api, alice):
    create(api, alice)
    publish(api, alice, settings={**SETTINGS, "system": "Version two."})
    conversation = start(api, alice, "support@1").json
    assert conversation["agent"] == {"name": "support", "version": 1}
    assert conversation["settings"]["system"] == "You look orders up."
    missing = start(api, alice, "support@9")
    assert missing.status_code == 422 and error(missing) == "unknown_agent"


def test_the_agents_tool_runs_in_a_conversation_started_from_it(api, alice):
    create(api, alice)
    cid = start(api, alice, "support").json["id"]
    api.say(cid, "where is order 7?", alice)
    api.run()
    assert api.types(cid) == ["user_msg", "assistant_msg", "tool_call", "tool_result", "assistant_msg"]
    [result] = [e for e in api.store.log.list_events(cid) if e.type == "tool_result"]
    assert result.content["output"] == "value of order-7"


def test_overrides_the_agent_allows_apply_to_that_conversation_only(api, alice):
    create(api, alice, overridable=["system"])
    conversation = start(api, alice, "support", system="Answer in French.").json
    assert conversation["settings"]["system"] == "Answer in French."
    assert conversation["settings"]["tools"] == ["lookup"]
    assert api.get("/v1/agents/support", alice).json["settings"]["system"] == "You look orders up."


def test_an_override_the_agent_does_not_allow_is_422_naming_the_field(api, alice):
    create(api, alice, overridable=["system"])
    response = start(api, alice, "support", tools=[], model="gpt-4o")
    assert response.status_code == 422 and error(response) == "not_overridable"
    assert [d["loc"] for d in response.json["error"]["details"]] == [["settings", "model"],
                                                                     ["settings", "tools"]]
    assert api.get("/v1/conversations", alice).json["conversations"] == []


@pytest.mark.parametrize("agent", ["", "a b", "support@0", "support@x", "support@1@2"])
def test_a_malformed_agent_reference_is_422(api, alice, agent):
    assert start(api, alice, agent).status_code == 422


def test_a_conversation_from_settings_runs_as_before_and_names_no_agent(api, alice):
    conversation = api.client.post("/v1/conversations", json={"settings": {"system": "hi"}},
                                   headers=alice).json
    assert conversation["agent"] is None and conversation["settings"]["system"] == "hi"


def test_a_fork_runs_the_same_agent_version(api, alice):
    create(api, alice)
    cid = start(api, alice, "support").json["id"]
    fork = api.client.post(f"/v1/conversations/{cid}/fork", json={"at_seq": 0}, headers=alice)
    assert fork.status_code == 201 and fork.json["agent"] == {"name": "support", "version": 1}


# ---- agents defined in code ----------------------------------------------------------------------


@pytest.fixture
def coded(store, tmp_path: Path) -> Api:
    """The API of a process whose modules define `support` and `concierge` (for acme only)."""
    path = tmp_path / "policy.toml"
    path.write_text('[agents.concierge]\ntenants = ["acme"]\n')
    return Api(store, policy=load_policy(str(path)), agents=["tests.support.agents_for_tests"])


def test_code_agents_are_listed_to_the_tenants_the_policy_offers_them_to(coded):
    acme, evil = coded.key("acme", "alice"), coded.key("evil", "mallory")
    listed = coded.get("/v1/agents", acme).json["agents"]
    assert [(a["name"], a["version"], a["source"]) for a in listed] == [
        ("concierge", 1, "code"), ("support", 1, "code")]
    assert [a["name"] for a in coded.get("/v1/agents", evil).json["agents"]] == ["support"]
    assert coded.get("/v1/agents/concierge", evil).status_code == 404


def test_a_conversation_from_a_code_agent_runs_its_tool(coded):
    acme = coded.key("acme", "alice")
    conversation = start(coded, acme, "support", system="Be quick.").json
    assert conversation["agent"] == {"name": "support", "version": 1}
    assert conversation["settings"]["system"] == "Be quick."
    coded.say(conversation["id"], "where is order 7?", acme)
    coded.run()
    assert "tool_result" in coded.types(conversation["id"])


def test_a_tenant_cannot_take_or_version_a_code_agents_name(coded):
    acme, evil = coded.key("acme", "alice"), coded.key("evil", "mallory")
    taken = create(coded, acme, name="support")
    assert taken.status_code == 409 and error(taken) == "agent_exists"
    versioned = publish(coded, acme, name="support")
    assert versioned.status_code == 409 and error(versioned) == "agent_in_code"
    assert create(coded, evil, name="concierge").status_code == 201  # not offered to evil


@pytest.mark.parametrize("version", ["0", "99999999999", "-1", "x"])
def test_a_version_no_agent_can_have_is_404(api, alice, version):
    create(api, alice)
    assert api.get(f"/v1/agents/support/versions/{version}", alice).status_code == 404


def test_the_list_comes_a_page_at_a_time_with_the_code_agents_in_name_order(store):
    coded = Api(store, agents=["tests.support.agents_for_tests"])  # support, concierge
    acme = coded.key("acme", "alice")
    for name in ("alpha", "delta", "zulu"):
        assert create(coded, acme, name=name).status_code == 201
    names, cursor = [], None
    while True:
        query = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = coded.get("/v1/agents", acme, query_string=query).json
        names.append([a["name"] for a in page["agents"]])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert names == [["alpha", "concierge"], ["delta", "support"], ["zulu"]]


def test_the_versions_of_an_agent_come_oldest_first_a_page_at_a_time(api, alice, mallory):
    create(api, alice)
    for system in ("two", "three"):
        publish(api, alice, settings={**SETTINGS, "system": system})
    first = api.get("/v1/agents/support/versions", alice, query_string={"limit": 2}).json
    assert [v["version"] for v in first["versions"]] == [1, 2] and first["next_cursor"] == 2
    rest = api.get("/v1/agents/support/versions", alice,
                   query_string={"limit": 2, "cursor": 2}).json
    assert [v["settings"]["system"] for v in rest["versions"]] == ["three"]
    assert rest["next_cursor"] is None
    assert api.get("/v1/agents/support/versions", mallory).status_code == 404


def test_the_versions_of_a_code_agent_are_listed_to_the_tenants_it_is_offered_to(coded):
    acme, evil = coded.key("acme", "alice"), coded.key("evil", "mallory")
    listed = coded.get("/v1/agents/concierge/versions", acme).json["versions"]
    assert [(v["name"], v["version"], v["source"]) for v in listed] == [("concierge", 1, "code")]
    assert coded.get("/v1/agents/concierge/versions", evil).status_code == 404
