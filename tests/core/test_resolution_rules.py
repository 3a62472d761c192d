"""The rules of an answer to a pending call (agentq.core.resolution_rules): one test per
rule and verdict."""
from __future__ import annotations

from typing import Any

import pytest

from agentq.core.events import ToolCallRecord
from agentq.core.refusal import Refusal
from agentq.core.resolution_rules import (
    AnswerQuestion,
    Approve,
    Close,
    Reject,
    ResolutionRequest,
    Unchanged,
    classify_resolution,
    resolution_request,
)
from agentq.core.subagents import child_conversation_id
from tests.support.clock import T0

QUESTION = {"asked": 1, "answered": 0, "question": {"message": "which?"}}


def answer(status: str, result: Any = None, *, reason=None, action=None) -> ResolutionRequest:
    made = resolution_request("c1", "call1", status=status, result=result, reason=reason, action=action)
    assert isinstance(made, ResolutionRequest)
    return made


def call(executor="human", status="pending", *, result=None, needs_approval=False,
         elicitation=None) -> ToolCallRecord:
    return ToolCallRecord(
        conversation_id="c1", id="call1", name="ask", executor=executor, status=status,
        args={}, round_id="r1", turn_id="t1", created_at=T0, result=result,
        needs_approval=needs_approval, elicitation=elicitation,
    )


def gated(status="pending", result=None) -> ToolCallRecord:
    return call("server", status, result=result, needs_approval=True)


def refusal(verdict) -> tuple[str, str]:
    assert isinstance(verdict, Refusal), verdict
    return verdict.kind, verdict.message


def test_an_unknown_status_is_refused_before_anything_is_read():
    made = resolution_request("c1", "call1", status="done")
    assert made == Refusal.invalid(
        "status must be one of resolved, errored, approved, rejected, answered, ran, "
        "did_not_run, abandoned")


def test_a_call_that_does_not_exist_is_not_found():
    assert refusal(classify_resolution(answer("resolved"), None)) == (
        "not_found", "no tool call call1 in conversation c1")


def test_a_sub_agent_call_is_answered_by_its_child_conversation_only():
    kind, message = refusal(classify_resolution(answer("resolved"), call("agent")))
    assert kind == "conflict" and child_conversation_id("c1", "call1") in message


@pytest.mark.parametrize(("status", "action"), [("answered", "accept"), ("approved", "accept"),
                                                ("rejected", "decline")])
def test_a_question_takes_an_answer_and_approve_or_reject_stand_for_accept_or_decline(status, action):
    asking = call("server", elicitation=QUESTION)
    assert classify_resolution(answer(status), asking) == AnswerQuestion(asking, action)


def test_an_answer_names_its_own_action():
    asking = call("server", elicitation=QUESTION)
    verdict = classify_resolution(answer("answered", action="cancel"), asking)
    assert verdict == AnswerQuestion(asking, "cancel")


def test_an_answer_to_a_question_carries_no_result():
    verdict = classify_resolution(answer("answered", {"x": 1}), call("server", elicitation=QUESTION))
    assert refusal(verdict)[0] == "invalid_input"


def test_a_call_that_asked_a_question_takes_no_result_from_a_person():
    kind, message = refusal(classify_resolution(answer("resolved", 1), call("server", elicitation=QUESTION)))
    assert kind == "conflict" and "answer its question" in message


def test_a_call_asked_no_question_takes_no_answer():
    kind, message = refusal(classify_resolution(answer("answered"), call()))
    assert kind == "conflict" and "was asked no question" in message


def test_a_decision_on_a_human_call_becomes_its_result():
    pending = call()
    verdict = classify_resolution(answer("rejected", reason="no"), pending)
    assert verdict == Close(pending, "resolved", {"approved": False, "reason": "no"})


def test_a_decision_on_a_human_call_carries_no_result():
    assert refusal(classify_resolution(answer("approved", 1), call()))[0] == "invalid_input"


def test_a_decision_on_a_client_call_needs_an_approval_it_does_not_need():
    verdict = classify_resolution(answer("approved"), call("client"))
    assert verdict == Refusal.conflict(
        "tool call call1 needs no approval: it takes a result (resolved or errored)",
        details={"status": "pending"})


def test_a_gated_call_takes_a_decision_not_a_result():
    verdict = classify_resolution(answer("resolved", 1), gated())
    assert verdict == Refusal.conflict(
        "tool call call1 waits for a decision: approved or rejected, not a result",
        details={"status": "pending"})


def test_an_approval_carries_no_result():
    assert refusal(classify_resolution(answer("approved", 1), gated()))[0] == "invalid_input"


def test_a_reason_goes_with_a_rejection_only():
    verdict = classify_resolution(answer("approved", reason="why"), gated())
    assert verdict == Refusal.invalid("a reason goes with a rejection")


def test_an_approval_of_a_pending_gated_call_approves_it():
    pending = gated()
    assert classify_resolution(answer("approved"), pending) == Approve(pending)


def test_a_rejection_of_a_pending_gated_call_rejects_it_with_its_reason():
    pending = gated()
    assert classify_resolution(answer("rejected", reason="too much"), pending) == Reject(pending, "too much")


@pytest.mark.parametrize("status", ["scheduled", "done"])
def test_the_same_approval_again_changes_nothing(status):
    approved = gated(status)
    assert classify_resolution(answer("approved"), approved) == Unchanged(approved)


def test_the_same_rejection_again_changes_nothing():
    rejected = gated("rejected", {"status": "rejected", "by": "ann", "reason": "no"})
    assert classify_resolution(answer("rejected", reason="no"), rejected) == Unchanged(rejected)


def test_another_decision_on_a_decided_call_is_late():
    verdict = classify_resolution(answer("rejected"), gated("scheduled"))
    assert verdict == Refusal.conflict("tool call call1 is already scheduled",
                                       details={"status": "scheduled"})


def test_a_reason_with_a_result_is_refused():
    verdict = classify_resolution(answer("resolved", 1, reason="why"), call())
    assert verdict == Refusal.invalid("a reason goes with a rejection of a call that needs approval")


def test_a_result_for_a_pending_call_closes_it():
    pending = call("client")
    assert classify_resolution(answer("errored", "boom"), pending) == Close(pending, "errored", "boom")


def test_the_same_result_again_changes_nothing():
    resolved = call(status="resolved", result={"ok": True})
    assert classify_resolution(answer("resolved", {"ok": True}), resolved) == Unchanged(resolved)


def test_another_result_for_a_closed_call_is_late():
    resolved = call(status="resolved", result={"ok": True})
    verdict = classify_resolution(answer("resolved", {"ok": False}), resolved)
    assert verdict == Refusal.conflict("tool call call1 is already resolved", details={"status": "resolved"})


def test_a_decision_on_a_human_call_already_resolved_is_late():
    resolved = call(status="resolved", result="yes")
    verdict = classify_resolution(answer("approved"), resolved)
    assert refusal(verdict) == ("conflict", "tool call call1 is already resolved")
