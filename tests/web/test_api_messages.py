"""Messages, the log and tool calls over HTTP: write first, follow-ups after, idempotent."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from agentq.followups import Advance, Settled
from tests.support.api import APPROVAL, WEATHER


def test_a_message_to_an_idle_conversation_starts_a_turn_and_sends_an_advance(api, alice):
    cid = api.create(alice, script=WEATHER)
    response = api.say(cid, "weather?", alice)
    assert response.status_code == 202
    assert response.json["queued"] is False and response.json["turn_id"]
    assert api.sent == [Advance(cid)]
    [event] = api.store.log.list_events(cid)
    assert event.type == "user_msg" and event.content["message_id"] == response.json["message_id"]


def test_a_turn_with_a_server_tool_completes_once_the_follow_ups_run(api, alice):
    cid = api.create(alice, script=WEATHER)
    api.say(cid, "weather?", alice)
    api.run()
    assert api.types(cid) == ["user_msg", "assistant_msg", "tool_call", "tool_result", "assistant_msg"]
    assert api.get(f"/v1/conversations/{cid}", alice).json["state"] == "idle"


def test_a_message_while_a_turn_runs_is_queued_with_the_turn_it_will_start(api, alice):
    cid = api.create(alice, script=WEATHER)
    api.say(cid, "weather?", alice)
    response = api.say(cid, "and tomorrow?", alice)
    assert response.status_code == 202
    assert response.json["queued"] is True and response.json["turn_id"]
    assert api.types(cid) == ["user_msg"]
    api.run()
    events = api.get(f"/v1/conversations/{cid}/events", alice).json["events"]
    assert [e["turn_id"] for e in events if e["type"] == "user_msg"][1] == response.json["turn_id"]


def test_on_busy_reject_is_409_with_the_current_state_and_writes_nothing(api, alice):
    cid = api.create(alice, script=WEATHER)
    api.say(cid, "weather?", alice)
    response = api.say(cid, "now!", alice, on_busy="reject")
    assert response.status_code == 409
    assert response.json["error"]["code"] == "conflict"
    assert response.json["error"]["details"] == {"state": "running"}
    assert api.types(cid) == ["user_msg"]
    assert api.store.inbox.list_of(cid) == []


def test_on_busy_interrupt_closes_the_waiting_turn_and_starts_the_next(api, alice):
    cid = api.create(alice, script=APPROVAL)
    api.say(cid, "pay Bob", alice)
    api.run()
    response = api.say(cid, "never mind", alice, on_busy="interrupt")
    assert response.status_code == 202 and response.json["queued"] is False
    [call] = api.store.calls.list_of(cid)
    assert call.status == "cancelled"
    assert api.types(cid)[-1] == "user_msg"


def test_the_same_idempotency_key_gets_the_first_answer_and_appends_nothing(api, alice):
    cid = api.create(alice, script=WEATHER)
    headers = {**alice, "Idempotency-Key": "msg-1"}
    first = api.say(cid, "weather?", headers)
    again = api.say(cid, "weather?", headers)
    assert first.status_code == again.status_code == 202
    assert again.json == first.json
    assert api.types(cid) == ["user_msg"]
    other = api.say(cid, "weather?", {**alice, "Idempotency-Key": "msg-2"})
    assert other.json["message_id"] != first.json["message_id"]


def test_created_at_is_stored_in_utc_and_comes_back_exactly(api, alice):
    cid = api.create(alice)
    api.say(cid, "hi", alice, created_at="2026-11-21T23:14:03.123456+01:00")
    [event] = api.get(f"/v1/conversations/{cid}/events", alice).json["events"]
    assert event["created_at"] == "2026-11-21T22:14:03.123456Z"


@pytest.mark.parametrize("body, where", [
    ({"content": ""}, ["content"]),
    ({"content": " \n\t"}, ["content"]),
    ({}, ["content"]),
    ({"content": 5}, ["content"]),
    ({"content": "hi", "on_busy": "shout"}, ["on_busy"]),
    ({"content": "hi", "created_at": "2026-11-21T22:14:03"}, ["created_at"]),
    ({"content": "hi", "created_at": "0001-01-01T00:00:00+01:00"}, ["created_at"]),
    ({"content": "hi", "priority": 1}, ["priority"]),
])
def test_an_invalid_message_is_422_and_nothing_is_written(api, alice, body, where):
    cid = api.create(alice)
    response = api.client.post(f"/v1/conversations/{cid}/messages", json=body, headers=alice)
    assert response.status_code == 422
    assert response.json["error"]["details"][0]["loc"] == where
    assert api.types(cid) == [] and api.sent == []


@pytest.mark.parametrize("key", ["", "k" * 256, "a\x01b"])
def test_an_idempotency_key_that_is_empty_too_long_or_has_control_characters_is_422(api, alice, key):
    cid = api.create(alice)
    response = api.say(cid, "hi", {**alice, "Idempotency-Key": key})
    assert response.status_code == 422
    assert response.json["error"]["details"][0]["loc"] == ["Idempotency-Key"]
    assert api.types(cid) == []


def test_a_message_to_an_unknown_conversation_is_404(api, alice):
    response = api.say("4f0c0cb5-0000-4000-8000-000000000000", "hi", alice)
    assert response.status_code == 404 and api.sent == []


def test_a_broker_that_is_down_still_gets_202_and_the_message_is_kept(api, alice):
    cid = api.create(alice, script=WEATHER)

    class BrokerDown:
        def send(self, followups):
            raise ConnectionError("broker unreachable")

    api.services.sender = BrokerDown()
    response = api.say(cid, "weather?", alice)
    assert response.status_code == 202
    assert api.types(cid) == ["user_msg"]


def test_events_are_paged_by_seq(api, alice):
    cid = api.create(alice, script=WEATHER)
    api.say(cid, "weather?", alice)
    api.run()
    first = api.get(f"/v1/conversations/{cid}/events", alice, query_string={"limit": 3}).json
    assert [e["seq"] for e in first["events"]] == [1, 2, 3] and first["next_after_seq"] == 3
    rest = api.get(f"/v1/conversations/{cid}/events", alice,
                   query_string={"after_seq": 3, "limit": 3}).json
    assert [e["seq"] for e in rest["events"]] == [4, 5] and rest["next_after_seq"] is None
    event = first["events"][2]
    assert set(event) == {"id", "seq", "type", "turn_id", "round_id", "created_at", "content"}
    assert event["type"] == "tool_call" and event["content"]["name"] == "get_weather"


@pytest.mark.parametrize("query", [{"after_seq": -1}, {"limit": 0}, {"limit": 1001}, {"after_seq": "x"}])
def test_a_bad_events_query_is_422(api, alice, query):
    cid = api.create(alice)
    assert api.get(f"/v1/conversations/{cid}/events", alice, query_string=query).status_code == 422


def test_tool_calls_are_listed_and_filtered_by_status(api, alice):
    cid = api.create(alice, script=[WEATHER[0], APPROVAL[0], APPROVAL[1]])
    api.say(cid, "weather, then pay", alice)
    api.run()
    every = api.get(f"/v1/conversations/{cid}/tool-calls", alice).json["tool_calls"]
    assert {c["name"]: c["status"] for c in every} == {"get_weather": "done", "approve_payment": "pending"}
    pending = api.get(f"/v1/conversations/{cid}/tool-calls", alice,
                      query_string={"status": "pending"}).json["tool_calls"]
    assert [c["name"] for c in pending] == ["approve_payment"]
    assert api.get(f"/v1/conversations/{cid}/tool-calls", alice,
                   query_string={"status": "asleep"}).status_code == 422


def _awaiting(api, alice):
    cid = api.create(alice, script=APPROVAL)
    api.say(cid, "pay Bob", alice)
    api.run()
    [call] = api.store.calls.list_of(cid, status="pending")
    return cid, call.id


def _resolve(api, headers, cid, call_id, body):
    return api.client.post(f"/v1/conversations/{cid}/tool-calls/{call_id}/resolution",
                           json=body, headers=headers)


def test_resolving_a_pending_call_finishes_the_turn(api, alice):
    cid, call_id = _awaiting(api, alice)
    response = _resolve(api, alice, cid, call_id, {"status": "resolved", "result": {"approved": True}})
    assert response.status_code == 200
    assert response.json["status"] == "resolved" and response.json["result"] == {"approved": True}
    assert api.sent == [Advance(cid), Settled(cid, call_id, "resolved")]  # Flower: not WAITING
    api.run()
    assert api.types(cid) == ["user_msg", "assistant_msg", "tool_call", "suspension",
                              "resolution", "tool_result", "assistant_msg"]
    assert api.get(f"/v1/conversations/{cid}", alice).json["state"] == "idle"
    resolution = next(e for e in api.store.log.list_events(cid) if e.type == "resolution")
    assert resolution.content["by"] == "alice"


def test_the_same_resolution_twice_is_200_and_a_different_one_is_409_with_the_status(api, alice):
    cid, call_id = _awaiting(api, alice)
    body = {"status": "resolved", "result": {"approved": True}}
    assert _resolve(api, alice, cid, call_id, body).status_code == 200
    count = len(api.types(cid))
    again = _resolve(api, alice, cid, call_id, body)
    assert again.status_code == 200 and again.json["status"] == "resolved"
    other = _resolve(api, alice, cid, call_id, {"status": "errored", "result": "no"})
    assert other.status_code == 409
    assert other.json["error"]["details"] == {"status": "resolved"}
    assert len(api.types(cid)) == count


def test_resolving_an_expired_call_is_409_with_its_status(api, alice):
    cid, call_id = _awaiting(api, alice)
    api.clock.tick(3601)
    api.sent.extend(api.runtime.expire(cid, call_id))
    response = _resolve(api, alice, cid, call_id, {"status": "resolved", "result": None})
    assert response.status_code == 409
    assert response.json["error"]["details"] == {"status": "expired"}


def test_resolving_an_unknown_call_is_404(api, alice):
    cid, _ = _awaiting(api, alice)
    response = _resolve(api, alice, cid, "call_nope", {"status": "resolved"})
    assert response.status_code == 404 and response.json["error"]["code"] == "not_found"


@pytest.mark.parametrize("body", [{"status": "maybe"}, {}, {"status": "resolved", "by": "me"}])
def test_an_invalid_resolution_is_422_and_the_call_stays_pending(api, alice, body):
    cid, call_id = _awaiting(api, alice)
    assert _resolve(api, alice, cid, call_id, body).status_code == 422
    assert api.store.calls.load(cid, call_id).status == "pending"


def test_the_user_header_is_who_the_message_acts_for(api):
    headers = api.key("acme", "bob")
    cid = api.create(headers)
    api.say(cid, "hi", headers)
    [event] = api.store.log.list_events(cid)
    assert event.content["scope"] == {"tenant": "acme", "user": "bob"}


def test_a_message_dated_in_the_far_future_is_kept_as_sent(api, alice):
    cid = api.create(alice)
    when = datetime.now(timezone.utc) + timedelta(days=365)
    api.say(cid, "later", alice, created_at=when.isoformat())
    [event] = api.store.log.list_events(cid)
    assert event.created_at == when
