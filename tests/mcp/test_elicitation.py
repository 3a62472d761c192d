"""A tool server's question mid-call (MCP elicitation, `input_required`): the call waits as a
pending call for a person's answer, which is checked against the server's schema and sent
back when the call is made again; against the tests' real MCP server."""
from __future__ import annotations

import os
from datetime import timedelta

import httpx2
import pytest

from agentq.cli.check import check_conversation
from agentq.client import ApiError, Client
from agentq.commands import Commands
from agentq.core.scope import Scope
from agentq.followups import Settled
from agentq.tenancy.policy import load_policy
from agentq.tools import Registry
from agentq.webhooks.payloads import call_info
from agentq.worker.tasks import enqueue
from tests.support.api import Api
from tests.support.drive import drain
from tests.support.mcp_servers import policy_text
from tests.support.processes import wait_for

pytestmark = pytest.mark.slow

ACME = Scope(tenant="acme", user="alice")
REFUND = [
    {"text": "Asking.", "tool_calls": [{"name": "mcp__crm__confirm_refund",
                                        "args": {"order": "o-17", "amount": 5}}]},
    {"text": "Done."},
]


@pytest.fixture
def asked(store, policy, monkeypatch):
    """A conversation whose refund call's server asked a person to confirm it: (api, id, key)."""
    monkeypatch.setenv("CRM_TOKEN", "Bearer t0ken")
    api = Api(store, policy=policy)
    alice = api.key("acme", "alice")
    cid = api.create(alice, tools=["mcp:crm/confirm_refund"], script=REFUND)
    assert api.say(cid, "refund o-17", alice).status_code in (200, 201, 202)
    api.run()
    return api, cid, alice


def _call_id(api: Api, cid: str) -> str:
    (call_id,) = [e.content["tool_call_id"] for e in api.store.log.list_events(cid)
                  if e.type == "tool_call"]
    return call_id


def _answer(api: Api, cid: str, alice, body):
    return api.client.post(f"/v1/conversations/{cid}/tool-calls/{_call_id(api, cid)}/resolution",
                           headers=alice, json=body)


def test_a_servers_question_leaves_the_call_pending_with_its_message_and_schema(asked):
    api, cid, alice = asked
    conversation = api.get(f"/v1/conversations/{cid}", alice).get_json()
    assert conversation["state"] == "awaiting_input"
    (pending,) = conversation["pending"]
    assert pending["executor"] == "server" and pending["expires_at"] is not None
    question = pending["elicitation"]
    assert question["mode"] == "form" and question["message"] == "Refund 5 for o-17?"
    assert question["requested_schema"]["required"] == ["confirm"]
    assert api.types(cid)[-1] == "suspension"
    assert "request_state" not in str(api.store.log.list_events(cid)[-1].content)  # the server's own


def test_the_call_waiting_webhook_carries_the_question(asked):
    api, cid, _ = asked
    info = call_info(api.store.log.list_events(cid), _call_id(api, cid), lambda name: None)
    assert info["elicitation"]["message"] == "Refund 5 for o-17?"
    assert info["expires_at"] is not None


@pytest.mark.parametrize("content, problem", [
    ({"confirm": "yes"}, "confirm: 'yes' is not of type 'boolean'"),
    ({"note": "x"}, "'confirm' is a required property"),
    ({"confirm": True, "note": "n" * 41}, "is too long"),
])
def test_an_answer_that_does_not_fit_the_schema_is_a_422_naming_why_and_nothing_changes(
        asked, content, problem):
    api, cid, alice = asked
    before = api.types(cid)
    refused = _answer(api, cid, alice, {"status": "answered", "content": content})
    assert refused.status_code == 422, refused.get_json()
    assert problem in refused.get_json()["error"]["message"]
    assert api.types(cid) == before and api.sent == []
    assert api.store.calls.load(cid, _call_id(api, cid)).status == "pending"


def test_hostile_answers_are_refused_with_a_4xx_and_change_nothing(asked):
    api, cid, alice = asked
    before = api.types(cid)
    for body in ({"status": "answered", "content": ["x"]},
                 {"status": "answered", "action": "shrug"},
                 {"status": "answered", "action": "decline", "content": {"confirm": True}},
                 {"status": "answered", "content": {"confirm": True}, "result": 1},
                 {"status": "resolved", "result": "I did it myself"}):
        refused = _answer(api, cid, alice, body)
        assert 400 <= refused.status_code < 500, (body, refused.get_json())
    assert api.types(cid) == before
    assert api.store.calls.load(cid, _call_id(api, cid)).status == "pending"


def test_an_accepted_answer_makes_the_call_again_with_it_and_the_model_reads_the_result(asked):
    api, cid, alice = asked
    body = {"status": "answered", "action": "accept", "content": {"confirm": True, "note": "ok"}}
    answered = _answer(api, cid, alice, body)
    assert answered.status_code == 200, answered.get_json()
    api.run()
    events = api.store.log.list_events(cid)
    assert [e.type for e in events] == ["user_msg", "assistant_msg", "tool_call", "suspension",
                                        "resolution", "tool_result", "assistant_msg"]
    assert events[4].content["action"] == "accept" and events[4].content["by"] == "alice"
    assert events[5].content["output"] == "refunded 5 for o-17 (ok)"
    assert _answer(api, cid, alice, body).status_code == 200  # the same answer again: no-op
    other = {"status": "answered", "content": {"confirm": False}}
    assert _answer(api, cid, alice, other).status_code == 409
    assert check_conversation(api.store, cid) == []
    steps = [s for s in api.store.steps.list_of(cid) if s.kind == "tool"]
    assert sorted(s.ref.get("answers", 0) for s in steps) == [0, 1]


def test_an_answer_to_a_question_settles_the_call_for_flower(asked):
    api, cid, alice = asked
    body = {"status": "answered", "action": "decline"}
    assert _answer(api, cid, alice, body).status_code == 200
    assert Settled(cid, _call_id(api, cid), "answered") in api.sent


def test_the_sdk_shows_the_question_and_replies_to_it(asked):
    api, cid, alice = asked
    http = httpx2.Client(transport=httpx2.WSGITransport(app=api.app), base_url="http://agentq",
                         headers=alice)
    with Client("http://agentq", "unused", http=http) as client:
        (pending,) = client.get_conversation(cid).pending
        assert pending.elicitation is not None and pending.elicitation.message.startswith("Refund")
        with pytest.raises(ApiError) as refused:
            client.reply(cid, pending.tool_call_id, {"confirm": 1})
        assert refused.value.status == 422
        replied = client.reply(cid, pending.tool_call_id, {"confirm": True, "note": "sdk"})
    assert replied.status == "scheduled"
    api.run()
    result = [e for e in api.store.log.list_events(cid) if e.type == "tool_result"][-1]
    assert result.content["output"] == "refunded 5 for o-17 (sdk)"


@pytest.mark.parametrize("body, said", [
    ({"status": "rejected"}, "not refunded: the person chose decline"),
    ({"status": "answered", "action": "decline"}, "not refunded: the person chose decline"),
    ({"status": "answered", "action": "cancel"}, "not refunded: the person chose cancel"),
])
def test_declining_or_cancelling_is_passed_to_the_server_as_such(asked, body, said):
    api, cid, alice = asked
    assert _answer(api, cid, alice, body).status_code == 200
    api.run()
    result = [e for e in api.store.log.list_events(cid) if e.type == "tool_result"][-1]
    assert result.content["output"] == said


def test_an_unanswered_question_expires_like_any_pending_call(asked):
    api, cid, alice = asked
    call = api.store.calls.load(cid, _call_id(api, cid))
    api.clock.tick((call.expires_at - api.clock()).total_seconds() + 1)
    drain(api.runtime, api.runtime.expire(cid, call.id))
    result = [e for e in api.store.log.list_events(cid) if e.type == "tool_result"][-1]
    assert result.content["status"] == "expired"
    assert api.store.conversations.load(cid).fsm.state == "idle"
    late = _answer(api, cid, alice, {"status": "answered", "content": {"confirm": True}})
    assert late.status_code == 409


def test_an_interrupt_cancels_a_call_that_waits_on_its_servers_question(asked):
    api, cid, alice = asked
    assert api.client.post(f"/v1/conversations/{cid}/cancel", headers=alice).status_code in (
        200, 202)
    api.run()
    assert api.store.calls.load(cid, _call_id(api, cid)).status == "cancelled"
    assert check_conversation(api.store, cid) == []


# ---- a real worker, killed ----------------------------------------------------------------


@pytest.mark.worker
@pytest.mark.postgres
@pytest.mark.redis
def test_a_question_survives_a_worker_kill_and_a_lost_task_and_the_answer_runs_once(
        pg_store_clean, broker, workers, beat, mcp_url, call_log, tmp_path):
    path = tmp_path / "worker-policy.toml"
    path.write_text(policy_text(mcp_url))
    commands = Commands(pg_store_clean, Registry.from_modules([]), policy=load_policy(str(path)))
    order = f"o{os.getpid()}-{tmp_path.name}"
    script = [{"tool_calls": [{"name": "mcp__crm__confirm_refund",
                               "args": {"order": order, "amount": 7}}]},
              {"text": "done"}]
    conv = commands.create_conversation(ACME, {"tools": ["mcp:crm"], "script": script})
    env = {"AGENTQ_POLICY": str(path), "CRM_TOKEN": "Bearer s3cret"}
    first = workers("w1", **env)
    _, follow = commands.post_message(conv.id, "refund it", ACME)
    enqueue(broker, follow)
    store = pg_store_clean
    wait_for(lambda: store.conversations.load(conv.id).fsm.state == "awaiting_input",
             timeout_s=60, what=f"the question; worker log:\n{first.log_text()}")
    first.kill()  # SIGKILL: nothing of the question lives in the worker
    (call,) = store.calls.list_of(conv.id)
    assert call.status == "pending" and call.elicitation["question"]["message"].startswith("Refund 7")
    commands.resolve(conv.id, call.id, ACME, status="answered", result=None, action="accept",
                     content={"confirm": True, "note": "after the kill"})
    # the answer's task is never sent (a lost broker message): the sweeper finds the call
    workers("w2", **env)
    beat(**env)
    wait_for(lambda: store.conversations.load(conv.id).fsm.state == "idle",
             timeout_s=90, what="the turn to finish")
    result = next(e for e in store.log.list_events(conv.id) if e.type == "tool_result").content
    assert (result["status"], result["output"]) == ("ok", f"refunded 7 for {order} (after the kill)")
    rounds = [line.split()[1:] for line in call_log.read_text().splitlines()
              if line.split()[0] == order]
    assert rounds == [[call.id, "1"], [call.id, "2"]]
    assert check_conversation(store, conv.id) == []


def test_in_a_run_nobody_attends_the_question_expires_by_its_rule_and_the_model_reads_why(
        store, policy, monkeypatch):
    monkeypatch.setenv("CRM_TOKEN", "Bearer t0ken")
    api = Api(store, policy=policy)
    alice = api.key("acme", "alice")
    cid = api.create(alice, tools=["mcp:crm/confirm_refund"], script=REFUND)
    _, follow = api.services.commands.post_message(
        cid, "refund o-17", ACME, unattended={"expire_after_s": 30, "schedule_id": "s1"})
    later = drain(api.runtime, follow)
    call = api.store.calls.load(cid, _call_id(api, cid))
    assert call.status == "pending" and call.elicitation is not None
    asked_at = [e for e in api.store.log.list_events(cid) if e.type == "suspension"][-1].created_at
    assert call.expires_at == asked_at + timedelta(seconds=30)  # not the question's own
    api.clock.tick(31)
    drain(api.runtime, later)
    result = [e for e in api.store.log.list_events(cid) if e.type == "tool_result"][-1]
    assert result.content["status"] == "expired"
    assert "question for a person went unanswered" in result.content["output"]
    assert "Nobody attends this run" in result.content["output"]
    assert api.store.conversations.load(cid).fsm.state == "idle"
    assert check_conversation(api.store, cid) == []
