"""/v1/conversations: create, list, read, end, and the next request's context."""
from __future__ import annotations

import pytest

from tests.support.api import APPROVAL, WEATHER
from tests.support.store import save_summary


def test_creating_a_conversation_answers_201_with_its_state_and_location(api, alice):
    response = api.client.post("/v1/conversations", json={"settings": {"system": "Be brief."}},
                               headers=alice)
    assert response.status_code == 201
    body = response.json
    assert response.headers["Location"] == f"/v1/conversations/{body['id']}"
    assert body["state"] == "idle" and body["last_seq"] == 0
    assert body["pending"] == [] and body["inbox"] == 0 and body["summary"] is None
    assert body["settings"]["system"] == "Be brief."
    assert api.store.conversations.load(body["id"]).tenant == "acme"


def test_creating_with_every_setting_defaulted_works(api, alice):
    response = api.client.post("/v1/conversations", json={}, headers=alice)
    assert response.status_code == 201
    assert response.json["settings"]["profile"] == "scripted"
    assert response.json["settings"]["model"] == "scripted"  # the profile's default model


def test_creating_with_a_tool_nobody_registered_is_422_unknown_tool_and_stores_nothing(api, alice):
    response = api.client.post("/v1/conversations", json={"settings": {"tools": ["launch_rockets"]}},
                               headers=alice)
    assert response.status_code == 422
    assert response.json["error"]["code"] == "unknown_tool"
    assert "launch_rockets" in response.json["error"]["message"]
    assert api.store.conversations.list_page() == []


@pytest.mark.parametrize("settings, said", [
    ({"max_tokens": 2000, "thinking": {"budget_tokens": 2048}},
     "max_tokens must be greater than thinking.budget_tokens"),
    ({"tool_choice": "required", "thinking": {"budget_tokens": 2048}},
     "thinking cannot be on with a tool_choice that forces a tool call"),
    ({"tools": ["get_weather"], "agents": ["get_weather"]}, "agents and tools name get_weather more than once"),
    ({"tools": ["get_weather"], "tool_choice": {"name": "add"}}, "tool_choice names 'add', which is not in tools"),
], ids=["max-tokens-under-budget", "thinking-forced", "named-twice", "choice-not-offered"])
def test_settings_each_valid_alone_but_contradicting_each_other_are_422_conflicting_settings(
        api, alice, settings, said):
    response = api.client.post("/v1/conversations", json={"settings": settings}, headers=alice)
    assert response.status_code == 422
    assert response.json["error"]["code"] == "conflicting_settings"
    assert response.json["error"]["message"] == said
    assert api.store.conversations.list_page() == []


def test_an_unknown_settings_field_is_422_with_where_it_is(api, alice):
    response = api.client.post("/v1/conversations", json={"settings": {"temperature_x": 2}},
                               headers=alice)
    assert response.status_code == 422
    details = response.json["error"]["details"]
    assert details[0]["loc"] == ["settings", "temperature_x"]
    assert details[0]["type"] == "extra_forbidden"


def test_listing_pages_with_a_cursor_until_next_cursor_is_null(api, alice):
    made = []
    for _ in range(5):
        made.append(api.create(alice))
        api.clock.tick(1)
    seen, cursor = [], None
    for _ in range(5):
        query = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = api.get("/v1/conversations", alice, query_string=query).json
        seen += [c["id"] for c in page["conversations"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == made


def test_listing_filters_by_state(api, alice):
    idle = api.create(alice)
    running = api.create(alice, script=WEATHER)
    api.say(running, "weather?", alice)
    waiting = api.create(alice, script=APPROVAL)
    api.say(waiting, "pay Bob", alice)
    ended = api.create(alice)
    api.client.delete(f"/v1/conversations/{ended}", headers=alice)
    api.sent.clear()
    api.runtime.advance(waiting)  # only this one: `running` stays mid-turn
    found = {}
    for state in ("idle", "running", "awaiting_input", "ended", "failed"):
        page = api.get("/v1/conversations", alice, query_string={"status": state}).json
        found[state] = [c["id"] for c in page["conversations"]]
    assert found == {"idle": [idle], "running": [running], "awaiting_input": [waiting],
                     "ended": [ended], "failed": []}


@pytest.mark.parametrize("query", [{"limit": 0}, {"limit": 201}, {"status": "asleep"},
                                   {"colour": "red"}, {"cursor": "a\x01b"}])
def test_a_bad_list_query_is_422(api, alice, query):
    response = api.get("/v1/conversations", alice, query_string=query)
    assert response.status_code == 422
    assert response.json["error"]["code"] == "validation_error"


def test_reading_a_conversation_shows_pending_calls_inbox_and_summary(api, alice):
    cid = api.create(alice, script=APPROVAL)
    api.say(cid, "pay Bob", alice)
    api.run()
    api.say(cid, "and then?", alice)  # the turn awaits a person: queued
    save_summary(api.store, conversation_id=cid, from_seq=1, to_seq=1, content={"text": "asked"},
                 version=1, now=api.clock())
    body = api.get(f"/v1/conversations/{cid}", alice).json
    assert body["state"] == "awaiting_input"
    assert body["last_seq"] == len(api.types(cid))
    [pending] = body["pending"]
    assert pending["name"] == "approve_payment" and pending["executor"] == "human"
    assert pending["args"] == {"amount": 20, "to": "Bob"} and pending["expires_at"].endswith("Z")
    assert body["inbox"] == 1
    assert body["summary"] == {"from_seq": 1, "to_seq": 1}


def test_reading_an_unknown_conversation_is_404_in_the_error_shape(api, alice):
    response = api.get("/v1/conversations/4f0c0cb5-0000-4000-8000-000000000000", alice)
    assert response.status_code == 404
    assert set(response.json["error"]) == {"code", "message", "details"}
    assert response.json["error"]["code"] == "not_found"


def test_an_id_with_characters_no_id_has_is_404(api, alice):
    assert api.get("/v1/conversations/a%20b", alice).status_code == 404
    assert api.get("/v1/conversations/" + "x" * 256, alice).status_code == 404


def test_ending_keeps_the_log_and_refuses_later_messages_with_409(api, alice):
    cid = api.create(alice, script=WEATHER)
    api.say(cid, "weather?", alice)
    api.run()
    before = api.types(cid)
    response = api.client.delete(f"/v1/conversations/{cid}", headers=alice)
    assert response.status_code == 200 and response.json["state"] == "ended"
    assert api.types(cid) == before
    late = api.say(cid, "still there?", alice)
    assert late.status_code == 409 and late.json["error"]["details"] == {"state": "ended"}
    assert api.types(cid) == before
    again = api.client.delete(f"/v1/conversations/{cid}", headers=alice)
    assert again.status_code == 200 and again.json["state"] == "ended"


def test_ending_an_unknown_conversation_is_404(api, alice):
    assert api.client.delete("/v1/conversations/nope", headers=alice).status_code == 404


def test_context_shows_the_next_request_and_that_it_is_valid(api, alice):
    cid = api.create(alice, script=WEATHER, system="Be brief.", tools=["get_weather"])
    api.say(cid, "weather?", alice)
    api.run()
    body = api.get(f"/v1/conversations/{cid}/context", alice).json
    assert body["profile"] == "scripted" and body["kind"] == "scripted"
    roles = [m["role"] for m in body["request"]["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert [t["name"] for t in body["request"]["tools"]] == ["get_weather"]
    assert body["wire"]["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["validation"] == {"valid": True, "problems": [], "repairs": []}


def test_context_of_an_anthropic_conversation_is_in_its_wire_shape(api, alice):
    cid = api.create(alice, profile="anthropic", model="claude-x", system="Be brief.")
    api.say(cid, "hello", alice)
    body = api.get(f"/v1/conversations/{cid}/context", alice).json
    assert body["profile"] == "anthropic" and body["kind"] == "anthropic" and body["model"] == "claude-x"
    assert body["wire"]["system"] == "Be brief."
    assert body["wire"]["messages"][0]["role"] == "user"
    assert body["validation"]["valid"] is True


def test_context_of_an_empty_conversation_says_what_repair_added(api, alice):
    cid = api.create(alice)
    body = api.get(f"/v1/conversations/{cid}/context", alice).json
    assert body["validation"]["repairs"] == ["inserted a leading user message"]
