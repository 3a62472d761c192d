"""`once` tools on a real store (SQLite and Postgres), follow-ups run in-process: a run found
started and unfinished is never run again blindly; it waits for a person as outcome_unknown
and each of the three answers leads where it says. An earlier attempt that started a run
and died is written as it would leave the store: its start mark, committed, and the tool's
effect, then nothing (tests/worker/test_once_calls.py kills real workers)."""
from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from agentq.cli.check import check_conversation
from agentq.core import once
from agentq.core.render import render
from agentq.core.scope import Scope
from agentq.errors import Conflict, InvalidInput
from agentq.followups import RunTool
from tests.support import tools_for_tests
from tests.support.drive import drain
from tests.support.once_runs import DEAD, started_and_died, until_tool

ALICE = Scope(tenant="t1", user="alice")
PERSON = Scope(tenant="t1", user="bob")


def pay(tool: str = "pay", order: str = "A-17") -> list[dict]:
    return [{"text": "Paying.", "tool_calls": [
        {"name": tool, "args": {"order": order, "amount": 12.5, "seconds": 0}}]},
        {"text": "Done."}]


def effects(call_id: str) -> int:
    """How often the payment's side effect happened (it counts at its start)."""
    return tools_for_tests.CALLS.get(f"pay:{call_id}", 0)


def found_unknown(commands, runtime, store, clock, script=None) -> tuple[str, str]:
    """A conversation whose `once` call was found started and unfinished."""
    conv = commands.create_conversation(ALICE, {"script": script or pay()})
    _, follow = commands.post_message(conv.id, "pay order A-17", ALICE)
    runs = until_tool(runtime, follow)
    call_id = started_and_died(store, clock, conv.id, runs)
    drain(runtime, runs)  # the takeover
    return conv.id, call_id


def test_a_once_call_runs_once_after_its_start_is_marked_with_its_worker(
    store, runtime, commands, clock
):
    conv = commands.create_conversation(ALICE, {"script": pay()})
    _, follow = commands.post_message(conv.id, "pay order A-17", ALICE)
    drain(runtime, follow)
    (call,) = store.calls.list_of(conv.id)
    assert call.status == "done" and effects(call.id) == 1
    assert call.started["run"] == 0 and call.started["started_at"]
    assert call.started["worker"].split(":")[1].isdigit()  # host:pid:thread
    assert store.conversations.load(conv.id).fsm.state == "idle"


def test_a_once_call_found_started_is_outcome_unknown_and_never_run_again(
    store, runtime, commands, clock
):
    cid, call_id = found_unknown(commands, runtime, store, clock)
    call = store.calls.load(cid, call_id)
    assert effects(call_id) == 1
    assert call.status == "pending" and once.waits(call)
    info = store.conversations.load(cid).fsm
    assert info.state == "awaiting_input" and info.pending[call_id]["outcome_unknown"]
    suspension = [e for e in store.log.list_events(cid) if e.type == "suspension"][-1]
    found = suspension.content["outcome_unknown"]
    assert found["args"] == {"order": "A-17", "amount": 12.5, "seconds": 0}
    assert found["worker"] == DEAD and found["ran_s"] == 7.0
    assert found["description"].startswith("Pay for an order")
    assert call.to_json()["outcome_unknown"]["started_at"] == found["started_at"]
    drain(runtime, [RunTool(cid, call_id, suspension.step_key)])  # delivered again
    assert effects(call_id) == 1 and check_conversation(store, cid) == []


def test_it_ran_closes_the_call_with_the_persons_result_for_the_model(
    store, runtime, commands, clock
):
    cid, call_id = found_unknown(commands, runtime, store, clock)
    closed, follow = commands.resolve(cid, call_id, PERSON, status="ran",
                                      result="paid 12.50, receipt R-9")
    assert closed.status == "resolved" and closed.started["answered"] == "ran"
    drain(runtime, follow)
    events = store.log.list_events(cid)
    assert [e.type for e in events][-3:] == ["resolution", "tool_result", "assistant_msg"]
    assert events[-3].content == {"tool_call_id": call_id, "status": "ran", "by": "bob"}
    view = store.log.load_view(cid)
    sent = render(replace(view, events=view.events[:-1])).messages
    read = next(m for m in sent if m.role == "tool")
    assert not read.is_error and "receipt R-9" in read.text
    assert effects(call_id) == 1 and check_conversation(store, cid) == []


def test_it_did_not_run_runs_the_call_once_more_as_its_next_run(
    store, runtime, commands, clock
):
    cid, call_id = found_unknown(commands, runtime, store, clock)
    answered, follow = commands.resolve(cid, call_id, PERSON, status="did_not_run", result=None)
    assert answered.status == "scheduled"
    drain(runtime, follow + follow)  # delivered twice: one run
    call = store.calls.load(cid, call_id)
    assert effects(call_id) == 2 and call.status == "done" and call.started["run"] == 1
    assert store.conversations.load(cid).fsm.state == "idle"
    assert check_conversation(store, cid) == []


def test_a_run_after_did_not_run_that_dies_too_is_outcome_unknown_again_not_run_a_third_time(
    store, runtime, commands, clock
):
    cid, call_id = found_unknown(commands, runtime, store, clock)
    _, follow = commands.resolve(cid, call_id, PERSON, status="did_not_run", result=None)
    started_and_died(store, clock, cid, follow)
    drain(runtime, follow)
    call = store.calls.load(cid, call_id)
    assert effects(call_id) == 2 and once.waits(call) and call.started["run"] == 1
    suspensions = [e for e in store.log.list_events(cid) if e.type == "suspension"]
    assert [s.content["outcome_unknown"]["run"] for s in suspensions] == [0, 1]
    commands.resolve(cid, call_id, PERSON, status="ran", result="paid")
    assert store.calls.load(cid, call_id).status == "resolved"


def test_abandon_gives_the_model_an_error_saying_the_outcome_is_unknown(
    store, runtime, commands, clock
):
    cid, call_id = found_unknown(commands, runtime, store, clock)
    closed, follow = commands.resolve(cid, call_id, PERSON, status="abandoned", result=None,
                                      reason="the bank is closed")
    drain(runtime, follow)
    assert closed.status == "errored" and effects(call_id) == 1
    result = next(e for e in store.log.list_events(cid) if e.type == "tool_result")
    assert result.content["status"] == "error"
    assert "outcome of this call is unknown" in result.content["output"]
    assert "the bank is closed" in result.content["output"]
    assert store.log.list_events(cid)[-1].type == "assistant_msg"
    assert check_conversation(store, cid) == []


@pytest.mark.parametrize(("status", "result", "reason"), [
    ("ran", "paid", None), ("did_not_run", None, None), ("abandoned", None, "closed")])
def test_the_same_answer_twice_changes_nothing(store, runtime, commands, clock,
                                               status, result, reason):
    cid, call_id = found_unknown(commands, runtime, store, clock)
    commands.resolve(cid, call_id, PERSON, status=status, result=result, reason=reason)
    log = store.log.list_events(cid)
    again, follow = commands.resolve(cid, call_id, PERSON, status=status, result=result,
                                     reason=reason)
    assert follow == [] and store.log.list_events(cid) == log


def test_a_different_answer_after_one_is_a_conflict_and_writes_nothing(
    store, runtime, commands, clock
):
    cid, call_id = found_unknown(commands, runtime, store, clock)
    commands.resolve(cid, call_id, PERSON, status="ran", result="paid")
    log = store.log.list_events(cid)
    with pytest.raises(Conflict):
        commands.resolve(cid, call_id, PERSON, status="did_not_run", result=None)
    assert store.log.list_events(cid) == log and effects(call_id) == 1


def test_an_outcome_answer_to_a_call_whose_outcome_is_known_is_a_conflict_and_writes_nothing(
    store, runtime, commands, clock
):
    script = [{"tool_calls": [{"name": "approve", "args": {"amount": 5}}]}, {"text": "ok"}]
    conv = commands.create_conversation(ALICE, {"script": script})
    drain(runtime, commands.post_message(conv.id, "go", ALICE)[1])
    (call_id,) = store.conversations.load(conv.id).fsm.pending
    log = store.log.list_events(conv.id)
    for status in once.ANSWERS:
        with pytest.raises(Conflict) as refused:
            commands.resolve(conv.id, call_id, PERSON, status=status,
                             result="x" if status == "ran" else None)
        assert refused.value.details == {"status": "pending"}
    assert store.log.list_events(conv.id) == log
    assert store.calls.load(conv.id, call_id).status == "pending"


def test_an_outcome_unknown_call_takes_no_approval_nor_result_nor_a_ran_without_result(
    store, runtime, commands, clock
):
    cid, call_id = found_unknown(commands, runtime, store, clock)
    log = store.log.list_events(cid)
    for status, result in (("approved", None), ("resolved", "paid")):
        with pytest.raises(Conflict):
            commands.resolve(cid, call_id, PERSON, status=status, result=result)
    with pytest.raises(InvalidInput):
        commands.resolve(cid, call_id, PERSON, status="ran", result=None)
    with pytest.raises(InvalidInput):
        commands.resolve(cid, call_id, PERSON, status="did_not_run", result="paid")
    assert store.log.list_events(cid) == log and once.waits(store.calls.load(cid, call_id))


def test_a_reconcile_that_finds_the_payment_closes_the_call_without_a_person(
    store, runtime, commands, clock, tmp_path, monkeypatch
):
    effects_file = tmp_path / "effects.jsonl"
    effects_file.write_text('{"call": "earlier", "order": "A-17", "amount": 12.5}\n')
    monkeypatch.setenv("AGENTQ_TEST_EFFECTS", str(effects_file))
    cid, call_id = found_unknown(commands, runtime, store, clock, pay("pay_reconciled"))
    call = store.calls.load(cid, call_id)
    assert call.status == "done" and effects(call_id) == 1
    result = next(e for e in store.log.list_events(cid) if e.type == "tool_result")
    assert result.content["output"] == "paid 12.50 for order A-17 (found)"
    assert not any(e.type == "suspension" for e in store.log.list_events(cid))
    assert store.conversations.load(cid).fsm.state == "idle"


def test_a_reconcile_that_finds_no_payment_runs_the_call_once(
    store, runtime, commands, clock, tmp_path, monkeypatch
):
    monkeypatch.setenv("AGENTQ_TEST_EFFECTS", str(tmp_path / "effects.jsonl"))
    cid, call_id = found_unknown(commands, runtime, store, clock, pay("pay_reconciled"))
    call = store.calls.load(cid, call_id)
    assert call.status == "done" and effects(call_id) == 2  # the one that died, and this one
    assert call.started["worker"] != DEAD  # this run was marked as this worker's, anew
    assert store.conversations.load(cid).fsm.state == "idle"


@pytest.mark.parametrize("order", ["unknown-1", "broken-1"])
def test_a_reconcile_that_cannot_tell_or_raises_leaves_it_to_a_person_with_why(
    store, runtime, commands, clock, order
):
    cid, call_id = found_unknown(commands, runtime, store, clock, pay("pay_reconciled", order))
    call = store.calls.load(cid, call_id)
    assert once.waits(call) and effects(call_id) == 1
    why = call.started["reconcile"]
    assert ("search is down" in why) if order.startswith("unknown") else ("500" in why)


def test_an_approved_once_call_found_unknown_has_no_deadline_left_to_expire_it(
    store, runtime, commands, clock
):
    script = [{"tool_calls": [{"name": "pay_gated", "args": {
        "order": "A-17", "amount": 12.5, "seconds": 0}}]}, {"text": "Done."}]
    conv = commands.create_conversation(ALICE, {"script": script})
    drain(runtime, commands.post_message(conv.id, "pay order A-17", ALICE)[1])
    (call_id,) = store.conversations.load(conv.id).fsm.pending
    _, follow = commands.resolve(conv.id, call_id, PERSON, status="approved", result=None)
    started_and_died(store, clock, conv.id, follow)
    later = drain(runtime, follow)
    call = store.calls.load(conv.id, call_id)
    assert once.waits(call) and call.expires_at is None
    clock.tick(3600)
    drain(runtime, later)  # the approval's expiry, armed when the call waited for it
    assert once.waits(store.calls.load(conv.id, call_id)) and effects(call_id) == 1


def test_a_turn_interrupted_while_a_call_waits_as_outcome_unknown_closes_it_as_cancelled(
    store, runtime, commands, clock
):
    cid, call_id = found_unknown(commands, runtime, store, clock)
    drain(runtime, commands.cancel(cid, ALICE))
    assert store.calls.load(cid, call_id).status == "cancelled"
    assert store.conversations.load(cid).fsm.state == "idle" and effects(call_id) == 1
    assert check_conversation(store, cid) == []


def test_a_once_call_whose_step_is_given_up_after_its_run_started_waits_as_outcome_unknown(
    store, runtime, commands, clock
):
    from agentq.runtime.tool_step import ToolStep

    conv = commands.create_conversation(ALICE, {"script": pay()})
    runs = until_tool(runtime, commands.post_message(conv.id, "pay order A-17", ALICE)[1])
    call_id = started_and_died(store, clock, conv.id, runs)
    conversation, call = store.calls.load_with_conversation(conv.id, call_id)
    assert ToolStep(runtime._ctx, runtime.registry, conversation, call).give_up(
        "the step killed its worker 5 times") == []
    waiting = store.calls.load(conv.id, call_id)
    assert once.waits(waiting) and waiting.started["given_up"] == "the step killed its worker 5 times"
    assert not any(e.type == "tool_result" for e in store.log.list_events(conv.id))
    assert check_conversation(store, conv.id) == []


def test_a_once_call_given_up_before_its_run_started_fails_as_any_call(
    store, runtime, commands, clock
):
    from agentq.runtime.tool_step import ToolStep

    conv = commands.create_conversation(ALICE, {"script": pay()})
    (run,) = until_tool(runtime, commands.post_message(conv.id, "pay order A-17", ALICE)[1])
    conversation, call = store.calls.load_with_conversation(conv.id, run.tool_call_id)
    ToolStep(runtime._ctx, runtime.registry, conversation, call).give_up("poison")
    result = next(e for e in store.log.list_events(conv.id) if e.type == "tool_result")
    assert result.content["status"] == "error" and effects(call.id) == 0


def test_in_a_run_nobody_attends_an_unknown_outcome_expires_and_the_model_is_told_not_to_redo_it(
    store, runtime, commands, clock
):
    conv = commands.create_conversation(ALICE, {"script": pay()})
    _, follow = commands.post_message(conv.id, "pay order A-17", ALICE,
                                      unattended={"expire_after_s": 60, "schedule_id": "s1"})
    runs = until_tool(runtime, follow)
    call_id = started_and_died(store, clock, conv.id, runs)
    later = drain(runtime, runs)  # the takeover finds it started: a person would decide
    call = store.calls.load(conv.id, call_id)
    assert call.status == "pending" and once.waits(call)
    assert call.expires_at == clock() + timedelta(seconds=60)
    clock.tick(61)
    drain(runtime, later)
    assert store.calls.load(conv.id, call_id).status == "expired" and effects(call_id) == 1
    result = [e for e in store.log.list_events(conv.id) if e.type == "tool_result"][-1]
    assert "may have taken effect" in result.content["output"]
    assert "Nobody attends this run" in result.content["output"]
    assert store.conversations.load(conv.id).fsm.state == "idle"
    assert check_conversation(store, conv.id) == []
