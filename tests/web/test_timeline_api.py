"""A turn's timeline and a conversation's tree over HTTP, on both backends: what each shows,
that another tenant reads neither, and that a timeline costs the same few statements
however many steps its turn took."""
from __future__ import annotations

from contextlib import contextmanager
from decimal import Decimal

import pytest
from sqlalchemy import event

from tests.support.api import APPROVAL, WEATHER


def first_turn(api, cid: str) -> str:
    return api.store.log.list_events(cid)[0].turn_id


def timeline_of(api, cid: str, user) -> dict:
    response = api.get(f"/v1/conversations/{cid}/turns/{first_turn(api, cid)}/timeline", user)
    assert response.status_code == 200, response.json
    return response.json


def test_a_turn_with_a_tool_shows_the_model_steps_the_tool_step_and_each_attempt(api, alice):
    cid = api.create(alice, script=WEATHER)
    api.say(cid, "weather?", alice)
    api.run()
    drawn = timeline_of(api, cid, alice)
    assert [step["kind"] for step in drawn["steps"]] == ["llm", "tool", "llm"]
    tool = drawn["steps"][1]
    assert tool["label"] == "tool get_weather" and tool["status"] == "succeeded"
    assert [(a["number"], a["outcome"]) for a in tool["attempts"]] == [(1, "done")]
    assert tool["attempts"][0]["worker"] and tool["attempts"][0]["claimed_at"]
    assert [call["name"] for call in drawn["calls"]] == ["get_weather"]
    assert len(drawn["model_calls"]) == 2 and drawn["model_calls"][0]["usage"]["output_tokens"] > 0
    assert drawn["ended_at"] is not None


def test_a_retried_model_call_shows_its_retries_on_its_step(api, alice):
    cid = api.create(alice, script=[{"text": "x", "fail": {"status": 500, "times": 1}}, *WEATHER])
    api.say(cid, "weather?", alice)
    api.run()
    model = timeline_of(api, cid, alice)["steps"][0]
    assert model["kind"] == "llm" and model["retries"] == 1
    assert [a["outcome"] for a in model["attempts"]] == ["done"]


def test_a_call_that_waits_for_approval_shows_the_wait_for_a_person_open_then_closed(api, alice):
    cid = api.create(alice, script=APPROVAL)
    api.say(cid, "pay Bob", alice)
    api.run()
    waiting = timeline_of(api, cid, alice)
    assert waiting["ended_at"] is None  # the turn waits on a person: it has not ended
    [call] = waiting["calls"]
    assert call["executor"] == "human" and call["waits"][0]["kind"] == "person"
    assert call["waits"][0]["end"] is None
    decided = api.client.post(
        f"/v1/conversations/{cid}/tool-calls/{call['tool_call_id']}/resolution", headers=alice,
        json={"status": "resolved", "result": {"approved": True}})
    assert decided.status_code == 200, decided.json
    api.run()
    [call] = timeline_of(api, cid, alice)["calls"]
    assert call["waits"][0]["end"] is not None


def test_another_tenant_reads_neither_the_timeline_nor_the_tree(api, alice, mallory):
    cid = api.create(alice, script=WEATHER)
    api.say(cid, "weather?", alice)
    api.run()
    turn = first_turn(api, cid)
    assert api.get(f"/v1/conversations/{cid}/turns/{turn}/timeline", mallory).status_code == 404
    assert api.get(f"/v1/conversations/{cid}/tree", mallory).status_code == 404
    assert api.get(f"/v1/conversations/{cid}/turns/no-such-turn/timeline", alice).status_code == 404


def test_the_tree_of_a_conversation_without_children_is_itself_with_its_tokens(api, alice):
    cid = api.create(alice, script=WEATHER)
    api.say(cid, "weather?", alice)
    api.run()
    response = api.get(f"/v1/conversations/{cid}/tree", alice)
    [node] = response.json["nodes"]
    assert node["id"] == cid and node["depth"] == 0 and node["state"] == "idle"
    assert node["model_calls"] == 2 and node["output_tokens"] > 0


@contextmanager
def statements(engine):
    """Counts the statements the engine runs inside the block."""
    seen: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany):
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", count)


def tools_script(calls: int) -> list[dict]:
    """A turn of `calls` rounds that each call a tool, then an answer: 2 * calls + 1 steps."""
    round_ = {"text": "again", "tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}]}
    return [round_] * calls + [{"text": "done"}]


@pytest.mark.parametrize("rounds", [1, 15])
def test_a_timeline_is_read_in_the_same_few_statements_however_many_steps(api, alice, rounds):
    cid = api.create(alice, script=tools_script(rounds))
    api.say(cid, "go", alice)
    api.run()
    turn = first_turn(api, cid)
    with statements(api.store.engine) as seen:
        response = api.get(f"/v1/conversations/{cid}/turns/{turn}/timeline", alice)
    assert len(response.json["steps"]) == 2 * rounds + 1
    reads = [s for s in seen if s.lstrip().upper().startswith("SELECT")]
    # the API key, the conversation, its turn's events, its calls, its steps
    assert len(reads) <= 6, reads


def agent(api, headers, name: str, **settings) -> None:
    response = api.client.post("/v1/agents", json={"name": name, "settings": settings},
                               headers=headers)
    assert response.status_code == 201, response.json


def test_the_tree_holds_children_and_grandchildren_each_with_its_agent_and_tokens(api, alice):
    agent(api, alice, "fact", script=[{"text": "Oslo is rainy."}])
    agent(api, alice, "researcher", agents=["fact"], script=[
        {"tool_calls": [{"name": "fact", "args": {"input": "Oslo?"}}]}, {"text": "Rain."}])
    cid = api.create(alice, agents=["researcher"], script=[
        {"tool_calls": [{"name": "researcher", "args": {"input": "Oslo?"}}]}, {"text": "Wet."}])
    api.say(cid, "weather?", alice)
    api.run()
    nodes = api.get(f"/v1/conversations/{cid}/tree", alice).json["nodes"]
    assert [(n["depth"], n["agent"], n["state"]) for n in nodes] == [
        (0, None, "idle"), (1, "researcher", "idle"), (2, "fact", "idle")]
    assert [n["model_calls"] for n in nodes] == [2, 2, 1]
    assert nodes[2]["parent_conversation_id"] == nodes[1]["id"] and nodes[1]["parent_conversation_id"] == cid
    under = api.get(f"/v1/conversations/{nodes[1]['id']}/tree", alice).json["nodes"]
    assert [(n["depth"], n["agent"]) for n in under] == [(0, "researcher"), (1, "fact")]
    assert under[0]["parent_conversation_id"] is None  # the top of the tree asked for


def test_a_sub_agent_call_names_its_child_whose_own_timeline_reads_the_same_way(api, alice):
    agent(api, alice, "fact", script=[{"text": "Oslo is rainy."}])
    cid = api.create(alice, agents=["fact"], script=[
        {"tool_calls": [{"name": "fact", "args": {"input": "Oslo?"}}]}, {"text": "Wet."}])
    api.say(cid, "weather?", alice)
    api.run()
    [call] = timeline_of(api, cid, alice)["calls"]
    assert call["executor"] == "agent" and call["child_agent"] == "fact"
    assert call["child_state"] == "idle"
    child = timeline_of(api, call["child_conversation_id"], alice)
    assert [step["kind"] for step in child["steps"]] == ["llm"]


def test_the_page_loads_the_timeline_s_files_which_put_text_in_the_dom_as_text_only(api):
    page = api.client.get("/ui/").data
    assert b'<script src="timeline.js" defer></script>' in page
    assert page.index(b"timeline.js") < page.index(b"app.js")  # its views exist when app.js routes
    for name, mimetype in (("timeline.js", "text/javascript"), ("timeline.css", "text/css")):
        served = api.client.get(f"/ui/{name}")
        assert served.status_code == 200 and served.mimetype == mimetype
    assert b"innerHTML" not in api.client.get("/ui/timeline.js").data


def test_a_model_calls_cost_and_each_nodes_cost_are_the_ones_its_commits_recorded(api, alice):
    from agentq.core.prices import Prices

    api.runtime.rules.prices = lambda settings: Prices(input=1_500, output=6_000,
                                                       cached_input=750, reasoning=6_000)
    cid = api.create(alice, script=WEATHER)
    api.say(cid, "weather?", alice)
    api.run()
    recorded = [e.content["cost_nanos"] for e in api.store.log.list_events(cid)
                if e.type == "assistant_msg"]
    assert len(recorded) == 2 and all(n > 0 for n in recorded)
    drawn = timeline_of(api, cid, alice)
    assert [Decimal(m["cost"]) for m in drawn["model_calls"]] == [
        Decimal(n).scaleb(-9) for n in recorded]
    [node] = api.get(f"/v1/conversations/{cid}/tree", alice).json["nodes"]
    assert Decimal(node["cost"]) == Decimal(sum(recorded)).scaleb(-9)


def test_the_operators_key_reads_any_tenants_turn_timeline_and_no_tree(api, alice, mallory):
    api.services.operator_key = "operator-secret-key"
    operator = {"Authorization": "Bearer operator-secret-key"}
    cid = api.create(alice, script=WEATHER)
    api.say(cid, "weather?", alice)
    api.run()
    path = f"/v1/conversations/{cid}/turns/{first_turn(api, cid)}/timeline"
    read = api.get(path, operator)
    assert read.status_code == 200 and read.json == timeline_of(api, cid, alice)
    assert api.get(path, mallory).status_code == 404  # a tenant's key still reads its own only
    assert api.get(f"/v1/conversations/{cid}/turns/no-such-turn/timeline", operator).status_code == 404
    assert api.get(f"/v1/conversations/{cid}/tree", operator).status_code == 401
