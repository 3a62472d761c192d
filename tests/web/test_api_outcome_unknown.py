"""An outcome_unknown call through the API: listed with what a person needs, answered with
ran / did_not_run / abandoned; a bad answer is a 4xx that writes nothing, and another
tenant finds nothing."""
from __future__ import annotations

import pytest

from tests.support.once_runs import DEAD, started_and_died, until_tool

PAY = [{"text": "Paying.", "tool_calls": [
    {"name": "pay", "args": {"order": "A-17", "amount": 12.5, "seconds": 0}}]},
    {"text": "Done."}]


def unknown(api, headers) -> tuple[str, str]:
    """A conversation whose `pay` call was found started and unfinished."""
    cid = api.create(headers, script=PAY)
    api.say(cid, "pay order A-17", headers)
    sent, api.sent[:] = list(api.sent), []
    runs = until_tool(api.runtime, sent)
    call_id = started_and_died(api.store, api.clock, cid, runs)
    api.sent.extend(runs)  # sent again, as the sweeper would
    api.run()
    return cid, call_id


def answer(api, headers, cid, call_id, body):
    return api.client.post(f"/v1/conversations/{cid}/tool-calls/{call_id}/resolution",
                           json=body, headers=headers)


def test_an_outcome_unknown_call_is_listed_pending_with_its_start_worker_and_description(
    api, alice
):
    cid, call_id = unknown(api, alice)
    [call] = api.get("/v1/tool-calls?status=pending", alice).json["tool_calls"]
    assert call["tool_call_id"] == call_id and call["executor"] == "server"
    found = call["outcome_unknown"]
    assert found["worker"] == DEAD and found["ran_s"] == 7.0
    assert found["started_at"] and found["found_at"]
    assert found["description"].startswith("Pay for an order")
    [listed] = api.get(f"/v1/conversations/{cid}/tool-calls?status=pending", alice).json[
        "tool_calls"]
    assert listed["outcome_unknown"] == found and listed["args"]["order"] == "A-17"


@pytest.mark.parametrize(("body", "status", "result_status"), [
    ({"status": "ran", "result": "paid, receipt R-9"}, "resolved", "ok"),
    ({"status": "abandoned", "reason": "the bank will call back"}, "errored", "error"),
    ({"status": "did_not_run"}, "done", "ok")])
def test_each_answer_is_taken_and_the_turn_goes_on(api, alice, body, status, result_status):
    cid, call_id = unknown(api, alice)
    answered = answer(api, alice, cid, call_id, body)
    assert answered.status_code == 200
    assert answered.json["outcome_unknown"]["answered"] == body["status"]
    again = answer(api, alice, cid, call_id, body)  # the same answer twice: 200 both times
    assert again.status_code == 200
    api.run()
    call = api.store.calls.load(cid, call_id)
    assert call.status == status
    result = next(e for e in api.store.log.list_events(cid) if e.type == "tool_result")
    assert result.content["status"] == result_status
    assert api.types(cid)[-1] == "assistant_msg"


@pytest.mark.parametrize("body", [
    {"status": "ran"},  # it ran: with what result?
    {"status": "did_not_run", "result": "paid"},
    {"status": "ran", "result": "paid", "reason": "why"},
    {"status": "abandoned", "reason": ""},
    {"status": "did-not-run"},
])
def test_a_malformed_answer_is_a_400_and_writes_nothing(api, alice, body):
    cid, call_id = unknown(api, alice)
    before = api.store.log.list_events(cid)
    refused = answer(api, alice, cid, call_id, body)
    assert refused.status_code in (400, 422), refused.json
    assert api.store.log.list_events(cid) == before
    assert api.store.calls.load(cid, call_id).status == "pending"


@pytest.mark.parametrize("body", [
    {"status": "approved"}, {"status": "resolved", "result": "paid"},
    {"status": "answered", "action": "accept"}])
def test_another_kind_of_answer_to_an_outcome_unknown_call_is_a_409(api, alice, body):
    cid, call_id = unknown(api, alice)
    before = api.store.log.list_events(cid)
    refused = answer(api, alice, cid, call_id, body)
    assert refused.status_code == 409 and refused.json["error"]["details"] == {"status": "pending"}
    assert api.store.log.list_events(cid) == before


@pytest.mark.parametrize("body", [
    {"status": "ran", "result": "paid"}, {"status": "did_not_run"}, {"status": "abandoned"}])
def test_an_outcome_answer_to_a_call_whose_outcome_is_known_is_a_409_that_writes_nothing(
    api, alice, body
):
    cid = api.create(alice, script=[{"tool_calls": [
        {"name": "approve_payment", "args": {"amount": 20, "to": "Bob"}}]}, {"text": "ok"}])
    api.say(cid, "pay Bob", alice)
    api.run()
    [call] = api.get(f"/v1/conversations/{cid}/tool-calls?status=pending", alice).json[
        "tool_calls"]
    before = api.store.log.list_events(cid)
    refused = answer(api, alice, cid, call["tool_call_id"], body)
    assert refused.status_code == 409
    assert api.store.log.list_events(cid) == before


def test_another_tenant_can_neither_see_nor_answer_the_call(api, alice, mallory):
    cid, call_id = unknown(api, alice)
    before = api.store.log.list_events(cid)
    assert api.get("/v1/tool-calls?status=pending", mallory).json["tool_calls"] == []
    for body in ({"status": "ran", "result": "paid"}, {"status": "did_not_run"},
                 {"status": "abandoned"}):
        assert answer(api, mallory, cid, call_id, body).status_code == 404
    assert api.get(f"/v1/conversations/{cid}/tool-calls/{call_id}/context",
                   mallory).status_code == 404
    assert api.store.log.list_events(cid) == before


@pytest.mark.parametrize("body", [
    {"status": "ran", "result": "paid, receipt R-9"}, {"status": "did_not_run"},
    {"status": "abandoned", "reason": "the bank will call back"}])
def test_an_answer_names_the_acting_user_and_the_key_it_came_with(api, body):
    bob = api.key("acme", "bob")
    cid, call_id = unknown(api, bob)
    [key] = api.store.keys.list_all(tenant="acme")
    assert answer(api, bob, cid, call_id, body).status_code == 200
    [said] = [e for e in api.store.log.list_events(cid)
              if e.type == "resolution" and e.content["status"] == body["status"]]
    assert said.content["decider"] == {"user": "bob", "key_id": key.id}
