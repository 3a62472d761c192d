"""Approval-gated tools on a real store (SQLite and Postgres), follow-ups run in-process:
a gated call waits for a person, runs once as the very call approved, or is refused."""
from __future__ import annotations

import pytest

from agentq.cli.check import check_conversation
from agentq.commands import Commands
from agentq.config import Config
from agentq.core.render import render
from agentq.errors import Conflict, InvalidInput
from agentq.followups import Settled
from agentq.runtime import Runtime
from agentq.tools import Registry
from agentq.core.scope import Scope
from tests.support import tools_for_tests
from tests.support.clock import Clock
from tests.support.drive import Recorder, drain

ALICE = Scope(tenant="t1", user="alice")
PERSON = Scope(tenant="t1", user="bob")


def refund(amount: float, order: str = "A-17") -> dict:
    return {"name": "issue_refund", "args": {"order": order, "amount": amount}}


REFUND = [{"text": "I will refund the order.", "tool_calls": [refund(1299.0)]}, {"text": "Done."}]


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def runtime(store, clock):
    registry = Registry.from_modules(["agentq.tools.demo", "tests.support.tools_for_tests"])
    return Runtime(store=store, registry=registry, pubsub=Recorder(), config=Config(lease_s=30.0),
                   clock=clock, sleep=lambda s: None)


@pytest.fixture
def commands(runtime, clock):
    return Commands(runtime.store, runtime.registry, clock=clock,
                    close_round=runtime.pubsub.close_round)


def start(commands, runtime, script):
    conv = commands.create_conversation(ALICE, {"script": script})
    _, follow = commands.post_message(conv.id, "refund my order", ALICE)
    return conv.id, drain(runtime, follow)


def runs(call_id: str) -> int:
    return tools_for_tests.CALLS.get(f"issue_refund:{call_id}", 0)


def gated_call(store, cid):
    (call_id,) = store.conversations.load(cid).fsm.pending
    return store.calls.load(cid, call_id)


def test_a_call_that_needs_approval_waits_for_a_person_with_its_exact_arguments(
    store, runtime, commands
):
    cid, later = start(commands, runtime, REFUND)
    call = gated_call(store, cid)
    assert call.status == "pending" and call.needs_approval and call.executor == "server"
    assert call.args == {"order": "A-17", "amount": 1299.0}
    assert store.conversations.load(cid).fsm.state == "awaiting_input"
    assert [e.tool_call_id for e in later] == [call.id]  # its expiry is armed
    assert runs(call.id) == 0


def test_a_call_the_rule_lets_through_runs_without_asking(store, runtime, commands):
    cid, _ = start(commands, runtime, [{"tool_calls": [refund(15.0)]}, {"text": "Done."}])
    (call,) = store.calls.list_of(cid)
    assert call.status == "done" and not call.needs_approval and runs(call.id) == 1


@pytest.mark.parametrize("ends", ["approved", "rejected", "cancelled"])
def test_a_call_that_stops_waiting_says_so_with_its_outcome(store, runtime, commands, ends):
    cid, _ = start(commands, runtime, REFUND)
    call = gated_call(store, cid)
    if ends == "cancelled":  # the turn is interrupted
        follow = commands.cancel(cid, ALICE)
    else:
        _, follow = commands.resolve(cid, call.id, PERSON, status=ends, result=None)
    assert [f for f in follow if isinstance(f, Settled)] == [Settled(cid, call.id, ends)]


def test_every_tool_call_event_says_whether_it_needs_approval(store, runtime, commands):
    cid, _ = start(commands, runtime, [{"tool_calls": [refund(15.0), refund(1299.0, "B-2")]}])
    gates = [e.content["needs_approval"] for e in store.log.list_events(cid) if e.type == "tool_call"]
    assert gates == [False, True]


def test_an_approved_call_runs_once_as_the_very_call_the_person_saw(store, runtime, commands):
    cid, _ = start(commands, runtime, REFUND)
    call = gated_call(store, cid)
    decided, follow = commands.resolve(cid, call.id, PERSON, status="approved", result=None)
    assert decided.status == "scheduled"
    drain(runtime, follow + follow)  # a repeated delivery runs nothing twice
    assert runs(call.id) == 1
    events = store.log.list_events(cid)
    assert [e.type for e in events][3:] == ["suspension", "resolution", "tool_result",
                                            "assistant_msg"]
    assert events[4].content == {"tool_call_id": call.id, "status": "approved", "by": "bob"}
    assert events[5].content["output"] == "refunded 1299.00 on order A-17"
    assert store.calls.load(cid, call.id).status == "done"
    assert check_conversation(store, cid) == []


def test_the_same_approval_twice_changes_nothing_and_a_later_rejection_conflicts(
    store, runtime, commands
):
    cid, _ = start(commands, runtime, REFUND)
    call = gated_call(store, cid)
    drain(runtime, commands.resolve(cid, call.id, PERSON, status="approved", result=None)[1])
    log = store.log.list_events(cid)
    again, follow = commands.resolve(cid, call.id, PERSON, status="approved", result=None)
    assert again.status == "done" and follow == []
    with pytest.raises(Conflict):
        commands.resolve(cid, call.id, PERSON, status="rejected", result=None)
    assert store.log.list_events(cid) == log and runs(call.id) == 1


def test_a_rejected_call_never_runs_and_the_model_reads_the_refusal_and_its_reason(
    store, runtime, commands
):
    cid, _ = start(commands, runtime, REFUND)
    call = gated_call(store, cid)
    _, follow = commands.resolve(cid, call.id, PERSON, status="rejected", result=None,
                                 reason="the lookup said 129.90 EUR")
    drain(runtime, follow)
    assert runs(call.id) == 0
    assert store.calls.load(cid, call.id).status == "rejected"
    events = store.log.list_events(cid)
    resolution = next(e for e in events if e.type == "resolution")
    assert resolution.content == {"tool_call_id": call.id, "status": "rejected", "by": "bob",
                                  "reason": "the lookup said 129.90 EUR"}
    result = next(e for e in events if e.type == "tool_result")
    assert result.content["status"] == "rejected"
    assert events[-1].type == "assistant_msg"  # the model spoke again, after reading it
    sent = render(store.log.load_view(cid)).messages
    refusal = next(m for m in sent if m.role == "tool")
    assert refusal.is_error and "refused" in refusal.text and "129.90 EUR" in refusal.text
    assert check_conversation(store, cid) == []


def test_an_approval_that_was_never_given_expires_as_a_refusal_by_the_system(
    store, runtime, commands, clock
):
    cid, later = start(commands, runtime, REFUND)
    call = gated_call(store, cid)
    clock.tick(61)
    drain(runtime, later)
    assert runs(call.id) == 0 and store.calls.load(cid, call.id).status == "expired"
    result = next(e for e in store.log.list_events(cid) if e.type == "tool_result")
    assert result.content["status"] == "expired"
    assert "refused by the system" in result.content["output"]
    with pytest.raises(Conflict):
        commands.resolve(cid, call.id, PERSON, status="approved", result=None)


def test_a_person_cannot_send_arguments_or_a_result_with_a_decision(store, runtime, commands):
    cid, _ = start(commands, runtime, REFUND)
    call = gated_call(store, cid)
    log = store.log.list_events(cid)
    with pytest.raises(InvalidInput):
        commands.resolve(cid, call.id, PERSON, status="approved", result={"amount": 12.99})
    with pytest.raises(Conflict) as refused:
        commands.resolve(cid, call.id, PERSON, status="resolved", result="refunded")
    assert refused.value.details == {"status": "pending"}
    assert store.log.list_events(cid) == log and store.calls.load(cid, call.id).status == "pending"


def test_a_decision_on_a_human_call_becomes_its_result_for_the_model(store, runtime, commands):
    script = [{"tool_calls": [{"name": "approve", "args": {"amount": 5}}]}, {"text": "ok"}]
    cid, _ = start(commands, runtime, script)
    (call_id,) = store.conversations.load(cid).fsm.pending
    with pytest.raises(InvalidInput):
        commands.resolve(cid, call_id, PERSON, status="approved", result={"amount": 500})
    closed, _ = commands.resolve(cid, call_id, PERSON, status="rejected", result=None,
                                 reason="over the limit")
    assert closed.status == "resolved"
    assert closed.result == {"approved": False, "reason": "over the limit"}
    again, _ = commands.resolve(cid, call_id, PERSON, status="rejected", result=None,
                                reason="over the limit")
    assert again.result == closed.result  # the same decision twice changes nothing


def test_a_decision_after_another_answer_to_a_human_call_is_a_conflict(store, runtime, commands):
    script = [{"tool_calls": [{"name": "approve", "args": {"amount": 5}}]}, {"text": "ok"}]
    cid, _ = start(commands, runtime, script)
    (call_id,) = store.conversations.load(cid).fsm.pending
    commands.resolve(cid, call_id, PERSON, status="resolved", result={"approved": True, "by": "x"})
    with pytest.raises(Conflict):
        commands.resolve(cid, call_id, PERSON, status="rejected", result=None)


def test_calling_the_tool_again_needs_a_new_approval(store, runtime, commands):
    script = [{"tool_calls": [refund(500.0)]}, {"tool_calls": [refund(500.0)]}, {"text": "Done."}]
    cid, _ = start(commands, runtime, script)
    first = gated_call(store, cid)
    drain(runtime, commands.resolve(cid, first.id, PERSON, status="approved", result=None)[1])
    second = gated_call(store, cid)
    assert second.id != first.id and second.status == "pending"
    assert runs(first.id) == 1 and runs(second.id) == 0


def test_a_rule_that_fails_asks_a_person_rather_than_letting_the_call_through():
    import agentq

    def broken(args, scope):
        raise KeyError("amount")

    @agentq.tool(needs_approval=broken)
    def pay(amount: float) -> str:
        """Pay."""
        return "paid"

    assert pay.gated({"amount": 1}, ALICE)


def test_needs_approval_is_for_server_tools():
    import agentq

    with pytest.raises(ValueError):
        @agentq.tool(executor="human", needs_approval=True)
        def ask(question: str) -> None:
            """Ask."""
