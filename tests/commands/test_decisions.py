"""Approvals with a person's edits, and who may decide, on a real store (SQLite and
Postgres) with follow-ups run in-process (agentq.commands.deciding)."""
from __future__ import annotations

import pytest

from agentq.cli.check import check_conversation
from agentq.commands import Commands
from agentq.core.deciders import Decider
from agentq.core.render import render
from agentq.core.scope import Scope
from agentq.errors import Conflict, Forbidden, InvalidInput, NotFound
from agentq.tenancy.deciders import DecidersRule
from agentq.tenancy.policy import Policy, TenantPolicy
from tests.support import tools_for_tests
from tests.support.drive import drain

ALICE = Scope(tenant="t1", user="alice")
BOB = Scope(tenant="t1", user="bob")
MODEL = {"order": "A-17", "amount": 1299.0}
PERSON = {"order": "A-17", "amount": 129.9}
FINANCE_KEY = Decider(user="bob", key_id="key-finance", roles=("finance",))
SUPPORT_KEY = Decider(user="bob", key_id="key-support", roles=("support",))


def start(commands, runtime, tool: str, args: dict) -> tuple[str, str]:
    script = [{"tool_calls": [{"name": tool, "args": args}]}, {"text": "Done."}]
    conv = commands.create_conversation(ALICE, {"script": script})
    _, follow = commands.post_message(conv.id, "refund my order", ALICE)
    drain(runtime, follow)
    (call_id,) = commands.store.conversations.load(conv.id).fsm.pending
    return conv.id, call_id


def test_an_edited_approval_runs_the_tool_once_with_the_person_s_arguments(
    store, runtime, commands
):
    cid, call_id = start(commands, runtime, "editable_refund", MODEL)
    decided, follow = commands.resolve(cid, call_id, BOB, status="approved", result=None,
                                       args=PERSON, decider=FINANCE_KEY)
    assert decided.args == PERSON and decided.model_args == MODEL
    drain(runtime, follow + follow)
    assert tools_for_tests.CALLS[f"editable_refund:{call_id}"] == 1
    assert tools_for_tests.EDITED_RUNS[call_id] == PERSON
    assert store.calls.load(cid, call_id).status == "done"
    assert check_conversation(store, cid) == []


def test_the_log_keeps_the_model_s_arguments_and_the_person_s(store, runtime, commands):
    cid, call_id = start(commands, runtime, "editable_refund", MODEL)
    drain(runtime, commands.resolve(cid, call_id, BOB, status="approved", result=None,
                                    args=PERSON, decider=FINANCE_KEY)[1])
    events = store.log.list_events(cid)
    asked = next(e for e in events if e.type == "tool_call")
    approved = next(e for e in events if e.type == "resolution")
    assert asked.content["args"] == MODEL
    assert approved.content["args"] == PERSON and approved.content["model_args"] == MODEL
    assert approved.content["decider"] == {"user": "bob", "key_id": "key-finance"}


def test_the_model_reads_that_a_person_changed_the_arguments(store, runtime, commands):
    cid, call_id = start(commands, runtime, "editable_refund", MODEL)
    drain(runtime, commands.resolve(cid, call_id, BOB, status="approved", result=None,
                                    args=PERSON)[1])
    sent = render(store.log.load_view(cid)).messages
    result = next(m for m in sent if m.role == "tool")
    assert result.text.startswith("[a person changed the arguments before approving")
    assert "129.9" in result.text and "refunded 129.90 on order A-17" in result.text


def test_edits_of_a_tool_that_does_not_allow_them_are_refused_and_nothing_is_written(
    store, runtime, commands
):
    cid, call_id = start(commands, runtime, "issue_refund", MODEL)
    log = store.log.list_events(cid)
    with pytest.raises(InvalidInput) as refused:
        commands.resolve(cid, call_id, BOB, status="approved", result=None, args=PERSON)
    assert refused.value.code == "not_editable"
    assert store.log.list_events(cid) == log
    assert store.calls.load(cid, call_id).status == "pending"
    assert store.calls.load(cid, call_id).args == MODEL


def test_edits_that_do_not_fit_the_tool_s_schema_are_refused_and_nothing_is_written(
    store, runtime, commands
):
    cid, call_id = start(commands, runtime, "editable_refund", MODEL)
    log = store.log.list_events(cid)
    for bad in ({"order": "A-17"}, {"order": "A-17", "amount": "lots"},
                {"order": "A-17", "amount": 1.0, "to": "me"}):
        with pytest.raises(InvalidInput) as refused:
            commands.resolve(cid, call_id, BOB, status="approved", result=None, args=bad)
        assert refused.value.code == "invalid_tool_args"
    assert store.log.list_events(cid) == log
    assert store.calls.load(cid, call_id).args == MODEL


def test_the_same_edited_approval_twice_runs_once_and_other_edits_conflict(
    store, runtime, commands
):
    cid, call_id = start(commands, runtime, "editable_refund", MODEL)
    drain(runtime, commands.resolve(cid, call_id, BOB, status="approved", result=None,
                                    args=PERSON)[1])
    log = store.log.list_events(cid)
    again, follow = commands.resolve(cid, call_id, BOB, status="approved", result=None, args=PERSON)
    assert follow == [] and again.args == PERSON
    with pytest.raises(Conflict):
        commands.resolve(cid, call_id, BOB, status="approved", result=None,
                         args={"order": "A-17", "amount": 1.0})
    with pytest.raises(Conflict):
        commands.resolve(cid, call_id, BOB, status="approved", result=None)
    assert store.log.list_events(cid) == log
    assert tools_for_tests.CALLS[f"editable_refund:{call_id}"] == 1


def test_a_key_without_the_tool_s_role_is_forbidden_and_nothing_is_written(
    store, runtime, commands
):
    cid, call_id = start(commands, runtime, "finance_refund", {"order": "F-1", "amount": 5.0})
    log = store.log.list_events(cid)
    for status in ("approved", "rejected"):
        with pytest.raises(Forbidden) as refused:
            commands.resolve(cid, call_id, BOB, status=status, result=None, decider=SUPPORT_KEY)
        assert refused.value.details["deciders"]["roles"] == ["finance"]
    assert store.log.list_events(cid) == log
    assert store.calls.load(cid, call_id).status == "pending"


def test_a_key_with_the_role_decides_and_the_log_names_it(store, runtime, commands):
    cid, call_id = start(commands, runtime, "finance_refund", {"order": "F-2", "amount": 5.0})
    drain(runtime, commands.resolve(cid, call_id, BOB, status="approved", result=None,
                                    decider=FINANCE_KEY)[1])
    approved = next(e for e in store.log.list_events(cid) if e.type == "resolution")
    assert approved.content["decider"] == {"user": "bob", "key_id": "key-finance"}
    assert approved.content["by"] == "bob"
    assert tools_for_tests.CALLS[f"finance_refund:{call_id}"] == 1


def test_the_user_who_asked_may_not_approve_their_own_call(store, runtime, commands):
    cid, call_id = start(commands, runtime, "finance_refund", {"order": "F-3", "amount": 5.0})
    own = Decider(user="alice", key_id="key-finance", roles=("finance",))
    with pytest.raises(Forbidden, match="alice made this call's turn"):
        commands.resolve(cid, call_id, ALICE, status="approved", result=None, decider=own)
    assert store.calls.load(cid, call_id).status == "pending"


def test_the_policy_names_who_decides_a_tenant_s_calls(store, runtime, clock):
    policy = Policy(profiles=Policy.default().profiles, tenants={"t1": TenantPolicy(
        deciders={"*": DecidersRule(users=("carol",))})})
    commands = Commands(store, runtime.registry, clock=clock, policy=policy,
                        close_round=runtime.pubsub.close_round)
    cid, call_id = start(commands, runtime, "issue_refund", MODEL)
    with pytest.raises(Forbidden):
        commands.resolve(cid, call_id, BOB, status="approved", result=None, decider=FINANCE_KEY)
    carol = Decider(user="carol", key_id="key-any")
    decided, _ = commands.resolve(cid, call_id, Scope("t1", "carol"), status="rejected",
                                  result=None, decider=carol)
    assert decided.status == "rejected"


def test_another_tenant_s_decision_is_not_found_before_anything_else(store, runtime, commands):
    cid, call_id = start(commands, runtime, "finance_refund", {"order": "F-4", "amount": 5.0})
    with pytest.raises(NotFound):
        commands.resolve(cid, call_id, Scope("t2", "bob"), status="approved", result=None,
                         decider=FINANCE_KEY)
