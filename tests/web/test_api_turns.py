"""Cancel, retry and fork over HTTP: each one a command, each refusing what it cannot do."""
from __future__ import annotations

from tests.support.api import APPROVAL, WEATHER


def post(api, path, headers, body=None):
    return api.client.post(path, headers=headers, json=body)


def test_cancel_closes_a_waiting_turn_and_a_second_cancel_is_409(api, alice):
    cid = api.create(alice, script=APPROVAL)
    api.say(cid, "pay Bob", alice)
    api.run()
    response = post(api, f"/v1/conversations/{cid}/cancel", alice)
    assert response.status_code == 200 and response.json["state"] == "idle"
    assert response.json["pending"] == []
    again = post(api, f"/v1/conversations/{cid}/cancel", alice)
    assert again.status_code == 409 and again.json["error"]["code"] == "conflict"
    statuses = [e.content.get("status") for e in api.store.log.list_events(cid) if e.type == "tool_result"]
    assert statuses == ["cancelled"]


def test_retry_redrives_only_a_failed_conversation(api, alice):
    cid = api.create(alice, script=[{"text": "never", "fail": {"status": 401, "times": 1}}])
    idle = api.create(alice, script=WEATHER)
    assert post(api, f"/v1/conversations/{idle}/retry", alice).status_code == 409
    api.say(cid, "hello", alice)
    api.run()
    assert api.get(f"/v1/conversations/{cid}", alice).json["state"] == "failed"
    response = post(api, f"/v1/conversations/{cid}/retry", alice)
    assert response.status_code == 200
    assert api.store.log.list_events(cid)[-1].content["status"] == "retried"


def test_fork_copies_whole_turns_and_refuses_a_cut_inside_one(api, alice):
    cid = api.create(alice, script=WEATHER)
    api.say(cid, "weather?", alice)
    api.run()
    inside = post(api, f"/v1/conversations/{cid}/fork", alice, {"at_seq": 3})
    assert inside.status_code == 409 and "inside a turn" in inside.json["error"]["message"]
    response = post(api, f"/v1/conversations/{cid}/fork", alice, {"at_seq": 5})
    assert response.status_code == 201 and response.json["last_seq"] == 5
    assert response.headers["Location"].endswith(response.json["id"])
    bad = post(api, f"/v1/conversations/{cid}/fork", alice, {"at_seq": "five"})
    assert bad.status_code == 422


def test_another_tenant_can_neither_cancel_retry_nor_fork(api, alice, mallory):
    cid = api.create(alice, script=APPROVAL)
    api.say(cid, "pay Bob", alice)
    api.run()
    log = api.types(cid)
    for path, body in (("cancel", None), ("retry", None), ("fork", {"at_seq": 0})):
        response = post(api, f"/v1/conversations/{cid}/{path}", mallory, body)
        assert response.status_code == 404, path
    assert api.types(cid) == log
