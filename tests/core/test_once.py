"""`once` calls in the pure core: the start mark (agentq.core.once), what the log does to the
state and to `decide`, and the rules of the three answers (agentq.core.outcome_rules)."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from agentq.core import once
from agentq.core.decide import AwaitInput, RunTools, Step, decide
from agentq.core.events import ToolCallRecord
from agentq.core.fsm import fold
from agentq.core.outcome_rules import Abandon, RecordRan, RunAgain
from agentq.core.refusal import Refusal
from agentq.core.resolution_rules import (
    Approve,
    ResolutionRequest,
    Unchanged,
    classify_resolution,
    resolution_request,
)
from tests.core import builders as b
from tests.support.clock import T0

MARK = once.start_mark(0, worker="host:1:2", now=T0)
FOUND = once.found_mark(MARK, now=T0 + timedelta(seconds=90), description="Pay.")


def found(call_id: str = "c1", run: int = 0) -> Any:
    return b._draft("suspension", {"pending": [call_id], "outcome_unknown": {
        "tool_call_id": call_id, "name": "pay", "run": run}})


def record(status: str = "pending", started: dict | None = FOUND, result: Any = None,
           needs_approval: bool = False) -> ToolCallRecord:
    return ToolCallRecord(
        conversation_id="cid", id="c1", name="pay", executor="server", status=status,  # type: ignore[arg-type]
        args={"order": "A"}, round_id="r1", turn_id="t1", created_at=T0, result=result,
        needs_approval=needs_approval, started=started)


def answer(status: str, result: Any = None, reason: str | None = None) -> ResolutionRequest:
    made = resolution_request("cid", "c1", status=status, result=result, reason=reason)
    assert isinstance(made, ResolutionRequest)
    return made


def test_a_run_counts_as_started_only_with_its_own_start_mark():
    assert not once.started_before(None, 0)
    assert once.started_before(MARK, 0)
    assert not once.started_before(MARK, 1)
    assert not once.started_before(once.answered_mark(FOUND, once.DID_NOT_RUN), 1)


def test_a_found_mark_says_how_long_the_run_ran_until_it_was_found():
    assert FOUND["ran_s"] == 90.0 and FOUND["worker"] == "host:1:2"
    assert FOUND["description"] == "Pay." and FOUND["found_at"]


def test_did_not_run_starts_the_next_run_not_yet_started():
    assert once.answered_mark(FOUND, once.DID_NOT_RUN) == {"run": 1, "answered": "did_not_run"}


def test_a_call_found_unknown_stops_running_and_waits_for_a_person():
    state = fold(b.log(b.user(), b.assistant(), b.call("c1", name="pay"), found("c1")))
    assert state.state == "awaiting_input" and state.running == ()
    assert state.pending["c1"]["outcome_unknown"] is True


def test_did_not_run_makes_the_call_run_again():
    state = fold(b.log(b.user(), b.assistant(), b.call("c1"), found("c1"),
                       b.resolution("c1", "did_not_run")))
    assert state.state == "running" and state.running == ("c1",) and state.pending == {}


def test_ran_with_its_result_closes_the_round():
    state = fold(b.log(b.user(), b.assistant(), b.call("c1"), found("c1"),
                       b.resolution("c1", "ran"), b.result("c1")))
    assert state.state == "running" and state.running == () and state.pending == {}


def test_decide_awaits_a_call_whose_outcome_is_unknown_instead_of_running_it():
    events = b.log(b.user(), b.assistant(), b.call("c1"), found("c1"))
    decision = decide(b.view(events))
    assert isinstance(decision, AwaitInput) and decision.pending == ("c1",)


def test_decide_runs_a_call_a_person_said_did_not_run_as_its_next_run():
    events = b.log(b.user(), b.assistant(), b.call("c1"), found("c1"),
                   b.resolution("c1", "did_not_run"))
    decision = decide(b.view(events))
    assert isinstance(decision, RunTools)
    assert decision.steps == (Step.tool(b.CID, "c1", 0, 1),)
    assert Step.tool(b.CID, "c1", 0, 1).key != Step.tool(b.CID, "c1").key


def test_decide_awaits_a_second_run_found_unknown_too():
    events = b.log(b.user(), b.assistant(), b.call("c1"), found("c1"),
                   b.resolution("c1", "did_not_run"), found("c1", run=1))
    assert isinstance(decide(b.view(events)), AwaitInput)


@pytest.mark.parametrize(("status", "result", "reason", "verdict"), [
    ("ran", "paid", None, RecordRan), ("did_not_run", None, None, RunAgain),
    ("abandoned", None, "closed", Abandon), ("abandoned", None, None, Abandon)])
def test_each_answer_to_a_waiting_call_has_its_verdict(status, result, reason, verdict):
    assert isinstance(classify_resolution(answer(status, result, reason), record()), verdict)


@pytest.mark.parametrize(("status", "result", "reason"), [
    ("ran", None, None), ("did_not_run", "paid", None), ("abandoned", "paid", None),
    ("ran", "paid", "why"), ("did_not_run", None, "why")])
def test_an_answer_of_the_wrong_shape_is_invalid(status, result, reason):
    verdict = classify_resolution(answer(status, result, reason), record())
    assert isinstance(verdict, Refusal) and verdict.kind == "invalid_input"


@pytest.mark.parametrize("status", ["approved", "rejected", "resolved", "errored", "answered"])
def test_a_waiting_call_takes_none_of_the_other_answers(status):
    verdict = classify_resolution(answer(status), record(needs_approval=True))
    assert isinstance(verdict, Refusal) and verdict.kind == "conflict"
    assert verdict.details == {"status": "pending"}


@pytest.mark.parametrize("started", [None, MARK])
def test_a_call_never_found_unknown_takes_none_of_the_three_answers(started):
    for status in once.ANSWERS:
        verdict = classify_resolution(answer(status, "x" if status == "ran" else None),
                                      record(started=started))
        assert isinstance(verdict, Refusal) and verdict.kind == "conflict"


def test_an_approval_of_a_gated_call_not_yet_started_is_still_an_approval():
    verdict = classify_resolution(answer("approved"), record(started=None, needs_approval=True))
    assert isinstance(verdict, Approve)


@pytest.mark.parametrize(("status", "result", "reason", "row_status"), [
    ("ran", "paid", None, "resolved"), ("did_not_run", None, None, "scheduled"),
    ("abandoned", None, "closed", "errored")])
def test_the_same_answer_again_is_unchanged_and_another_is_a_conflict(
    status, result, reason, row_status
):
    answered = record(row_status, once.answered_mark(FOUND, status, reason),
                      result=result)
    assert isinstance(classify_resolution(answer(status, result, reason), answered), Unchanged)
    other = "abandoned" if status != "abandoned" else "did_not_run"
    verdict = classify_resolution(answer(other), answered)
    assert isinstance(verdict, Refusal) and verdict.kind == "conflict"


def test_ran_again_with_another_result_is_a_conflict():
    answered = record("resolved", once.answered_mark(FOUND, "ran"), result="paid")
    verdict = classify_resolution(answer("ran", "paid twice"), answered)
    assert isinstance(verdict, Refusal) and verdict.kind == "conflict"
