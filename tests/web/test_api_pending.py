"""GET /v1/tool-calls: a tenant's calls across its conversations, filtered, paged, its own only."""
from __future__ import annotations

import pytest

from tests.support.api import APPROVAL, WEATHER

PENDING = "/v1/tool-calls?status=pending"


def waiting(api, headers, *, gap_s: float = 1.0) -> str:
    """A conversation whose turn waits for a person to approve a payment, `gap_s` after the last."""
    api.clock.tick(gap_s)
    cid = api.create(headers, script=APPROVAL)
    api.say(cid, "pay Bob", headers)
    api.run()
    return cid


def test_pending_calls_of_every_conversation_are_listed_with_their_conversation(api, alice):
    first, second = waiting(api, alice), waiting(api, alice)
    done = api.create(alice, script=WEATHER)
    api.say(done, "weather?", alice)
    api.run()
    answer = api.get(PENDING, alice)
    assert answer.status_code == 200
    calls = answer.json["tool_calls"]
    assert [c["conversation_id"] for c in calls] == [first, second]
    assert {c["name"] for c in calls} == {"approve_payment"}
    assert calls[0]["args"] == {"amount": 20, "to": "Bob"} and calls[0]["executor"] == "human"
    assert answer.json["next_cursor"] is None


def test_a_resolved_call_leaves_the_pending_list_and_shows_under_its_status(api, alice):
    cid = waiting(api, alice)
    [call] = api.get(PENDING, alice).json["tool_calls"]
    url = f"/v1/conversations/{cid}/tool-calls/{call['tool_call_id']}/resolution"
    resolved = api.client.post(url, json={"status": "resolved", "result": {"approved": True}}, headers=alice)
    assert resolved.status_code == 200
    assert api.get(PENDING, alice).json["tool_calls"] == []
    [closed] = api.get("/v1/tool-calls?status=resolved", alice).json["tool_calls"]
    assert closed["tool_call_id"] == call["tool_call_id"] and closed["result"] == {"approved": True}


def test_the_executor_filter_keeps_server_calls_out_of_a_person_s_queue(api, alice):
    server = api.create(alice, script=WEATHER)
    api.say(server, "weather?", alice)
    api.run()
    person = waiting(api, alice)
    every = api.get("/v1/tool-calls", alice).json["tool_calls"]
    assert {c["conversation_id"] for c in every} == {server, person}
    humans = api.get("/v1/tool-calls?executor=human", alice).json["tool_calls"]
    assert [c["conversation_id"] for c in humans] == [person]


@pytest.mark.parametrize("gap_s", [1.0, 0.0], ids=["apart", "same-instant"])
def test_pages_follow_the_cursor_without_gaps_or_repeats(api, alice, gap_s):
    cids = [waiting(api, alice, gap_s=gap_s) for _ in range(5)]
    seen, cursor, pages = [], None, 0
    while True:
        query = PENDING + "&limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = api.get(query, alice).json
        pages += 1
        seen += [c["conversation_id"] for c in page["tool_calls"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert seen == (cids if gap_s else sorted(cids))  # calls made at one instant: by conversation id


def test_another_tenant_sees_none_of_the_calls_even_with_a_cursor_naming_one(api, alice, mallory):
    cid = waiting(api, alice)
    waiting(api, alice)
    [first, _] = api.get(PENDING, alice).json["tool_calls"]
    assert api.get(PENDING, mallory).json == {"tool_calls": [], "next_cursor": None}
    cursor = f"{cid}/{first['tool_call_id']}"
    assert api.get(f"{PENDING}&cursor={cursor}", mallory).json["tool_calls"] == []
    theirs = waiting(api, mallory)
    assert [c["conversation_id"] for c in api.get(PENDING, mallory).json["tool_calls"]] == [theirs]


def test_the_list_needs_a_valid_key(api, alice):
    waiting(api, alice)
    assert api.client.get(PENDING).status_code == 401
    wrong = api.get(PENDING, {"Authorization": "Bearer not-a-key"})
    assert wrong.status_code == 401 and wrong.json["error"]["code"] == "unauthorized"


def test_bad_queries_are_422_naming_the_parameter(api, alice):
    for query, field in (
        ("status=waiting", "status"), ("executor=robot", "executor"), ("limit=0", "limit"),
        ("limit=201", "limit"), ("limit=ten", "limit"), ("cursor=no-slash", "cursor"),
        ("cursor=a/b/c", "cursor"), ("colour=blue", "colour"),
    ):
        answer = api.get(f"/v1/tool-calls?{query}", alice)
        assert answer.status_code == 422, query
        assert answer.json["error"]["code"] == "validation_error"
        assert [d["loc"][-1] for d in answer.json["error"]["details"]] == [field], query


def test_the_spec_declares_the_list_with_its_query_parameters(api):
    spec = api.client.get("/openapi.json").json
    operation = spec["paths"]["/v1/tool-calls"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {"status", "executor", "cursor", "limit"}
    assert {"200", "401", "422"} <= set(operation["responses"])
    assert operation["security"] == [{"bearer": []}]
