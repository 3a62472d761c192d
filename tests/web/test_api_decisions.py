"""Approvals with edits and who may decide, through the HTTP API: the answer's status, what
is written (nothing, when refused), and what the lists of pending calls say."""
from __future__ import annotations

import pytest

from tests.support import tools_for_tests

MODEL = {"order": "A-17", "amount": 1299.0}
PERSON = {"order": "A-17", "amount": 129.9}


def waiting(api, headers, tool: str, args: dict) -> tuple[str, str]:
    """A conversation of `headers`' user whose call of `tool` waits for a decision."""
    script = [{"tool_calls": [{"name": tool, "args": args}]}, {"text": "Done."}]
    cid = api.create(headers, script=script)
    assert api.say(cid, "refund my order", headers).status_code == 202
    api.run()
    (call_id,) = api.store.conversations.load(cid).fsm.pending
    return cid, call_id


def decide(api, cid: str, call_id: str, headers, **body):
    url = f"/v1/conversations/{cid}/tool-calls/{call_id}/resolution"
    return api.client.post(url, json=body, headers=headers)


@pytest.fixture
def finance(api):
    """A key of tenant acme with the role finance, acting for user bob."""
    return api.key("acme", "bob", roles=("finance",))


def test_an_approval_with_edits_runs_the_tool_with_them_and_shows_both(api, alice, finance):
    cid, call_id = waiting(api, alice, "editable_refund", MODEL)
    answer = decide(api, cid, call_id, finance, status="approved", args=PERSON)
    assert answer.status_code == 200, answer.json
    assert answer.json["args"] == PERSON and answer.json["model_args"] == MODEL
    api.run()
    assert tools_for_tests.EDITED_RUNS[call_id] == PERSON
    [shown] = api.get(f"/v1/conversations/{cid}/tool-calls", alice).json["tool_calls"]
    assert shown["status"] == "done" and shown["args"] == PERSON
    assert shown["model_args"] == MODEL and shown["editable"] is True


def test_edits_of_a_tool_that_does_not_allow_them_are_422_and_nothing_is_written(api, alice):
    cid, call_id = waiting(api, alice, "issue_refund", MODEL)
    before = api.types(cid)
    answer = decide(api, cid, call_id, alice, status="approved", args=PERSON)
    assert answer.status_code == 422 and answer.json["error"]["code"] == "not_editable"
    assert api.types(cid) == before and api.sent == []
    assert api.store.calls.load(cid, call_id).args == MODEL


def test_edits_that_do_not_fit_the_schema_are_422_and_nothing_is_written(api, alice):
    cid, call_id = waiting(api, alice, "editable_refund", MODEL)
    before = api.types(cid)
    answer = decide(api, cid, call_id, alice, status="approved",
                    args={"order": "A-17", "amount": "a lot"})
    assert answer.status_code == 422 and answer.json["error"]["code"] == "invalid_tool_args"
    assert "amount" in answer.json["error"]["message"]
    assert api.types(cid) == before and api.sent == []


def test_a_key_without_the_role_is_403_and_nothing_is_written(api, alice):
    cid, call_id = waiting(api, alice, "finance_refund", {"order": "F-1", "amount": 5.0})
    support = api.key("acme", "bob", roles=("support",))
    before = api.types(cid)
    for status in ("approved", "rejected"):
        answer = decide(api, cid, call_id, support, status=status)
        assert answer.status_code == 403 and answer.json["error"]["code"] == "forbidden"
        assert answer.json["error"]["details"]["deciders"]["roles"] == ["finance"]
    assert api.types(cid) == before and api.sent == []
    assert api.store.calls.load(cid, call_id).status == "pending"


def test_the_decision_event_names_the_acting_user_and_the_key_id_never_its_secret(api, alice):
    cid, call_id = waiting(api, alice, "finance_refund", {"order": "F-2", "amount": 5.0})
    key_id, secret = api.store.keys.create("acme", api.clock(), roles=("finance",))
    headers = {"Authorization": f"Bearer {secret}", "X-Agentq-User": "bob"}
    assert decide(api, cid, call_id, headers, status="approved").status_code == 200
    [event] = [e for e in api.store.log.list_events(cid) if e.type == "resolution"]
    assert event.content["decider"] == {"user": "bob", "key_id": key_id}
    assert secret not in str(event.content)


def test_the_user_whose_turn_made_the_call_may_not_approve_it(api):
    asker = api.key("acme", "alice", roles=("finance",))
    cid, call_id = waiting(api, asker, "finance_refund", {"order": "F-3", "amount": 5.0})
    answer = decide(api, cid, call_id, asker, status="approved")
    assert answer.status_code == 403 and "alice" in answer.json["error"]["message"]
    assert api.store.calls.load(cid, call_id).status == "pending"


def test_another_tenant_s_decision_is_404_even_with_the_role(api, alice):
    cid, call_id = waiting(api, alice, "finance_refund", {"order": "F-4", "amount": 5.0})
    outsider = api.key("evil", "mallory", roles=("finance",))
    answer = decide(api, cid, call_id, outsider, status="approved")
    assert answer.status_code == 404
    assert api.store.calls.load(cid, call_id).status == "pending"


def test_the_lists_of_pending_calls_say_who_may_decide_and_whether_the_caller_may(
    api, alice, finance
):
    cid, call_id = waiting(api, alice, "finance_refund", {"order": "F-5", "amount": 5.0})
    for headers, may in ((alice, False), (finance, True)):
        for path in ("/v1/tool-calls?status=pending",
                     f"/v1/conversations/{cid}/tool-calls?status=pending"):
            [shown] = api.get(path, headers).json["tool_calls"]
            assert shown["tool_call_id"] == call_id and shown["may_decide"] is may
            assert shown["deciders"]["roles"] == ["finance"]
            assert shown["deciders"]["not_self"] is True
            assert "a key with role finance" in shown["deciders"]["description"]


def test_a_call_anyone_may_decide_says_so(api, alice):
    cid, _ = waiting(api, alice, "editable_refund", MODEL)
    [shown] = api.get("/v1/tool-calls?status=pending", alice).json["tool_calls"]
    assert shown["may_decide"] is True and shown["editable"] is True
    assert shown["deciders"]["description"] == "any key of the tenant"
