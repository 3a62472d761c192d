"""Approving with edited arguments (agentq.core.edits): when a person may, and what the
model reads."""
from __future__ import annotations

from dataclasses import replace

from agentq.core.edits import NOT_EDITABLE, edit_note, with_edits
from agentq.core.events import ToolCallRecord
from agentq.core.refusal import Refusal
from agentq.core.render import render
from agentq.core.resolution_rules import Approve, Close, Reject, Unchanged
from tests.core import builders as b
from tests.support.clock import T0

MODEL = {"order": "A-17", "amount": 1299.0}
PERSON = {"order": "A-17", "amount": 129.9}


def gated(status="pending", *, args=MODEL, model_args=None) -> ToolCallRecord:
    return ToolCallRecord(
        conversation_id="c1", id="call1", name="refund", executor="server", status=status,
        args=args, round_id="r1", turn_id="t1", created_at=T0, needs_approval=True,
        model_args=model_args,
    )


def test_an_approval_without_arguments_is_as_it_was():
    verdict = Approve(gated())
    assert with_edits(verdict, "approved", None, editable=False) == verdict


def test_edited_arguments_are_refused_when_the_tool_does_not_allow_them():
    verdict = with_edits(Approve(gated()), "approved", PERSON, editable=False)
    assert isinstance(verdict, Refusal) and verdict.kind == "invalid_input"
    assert verdict.code == NOT_EDITABLE


def test_edited_arguments_of_an_editable_tool_go_with_the_approval():
    assert with_edits(Approve(gated()), "approved", PERSON, editable=True) == Approve(
        gated(), args=PERSON)


def test_the_model_s_own_arguments_sent_back_are_no_edit():
    assert with_edits(Approve(gated()), "approved", dict(MODEL), editable=True) == Approve(gated())


def test_edited_arguments_go_with_an_approval_only():
    verdict = with_edits(Reject(gated(), None), "rejected", PERSON, editable=True)
    assert isinstance(verdict, Refusal) and verdict.kind == "invalid_input"


def test_edited_arguments_are_refused_for_a_call_that_needs_no_approval():
    human = replace(gated(), executor="human", needs_approval=False)
    verdict = with_edits(Close(human, "resolved", {"approved": True}), "approved", PERSON,
                         editable=True)
    assert isinstance(verdict, Refusal)


def test_the_same_edited_approval_twice_changes_nothing():
    approved = gated("scheduled", args=PERSON, model_args=MODEL)
    assert with_edits(Unchanged(approved), "approved", PERSON, editable=True) == Unchanged(approved)


def test_other_edits_after_an_approval_are_late():
    approved = gated("scheduled", args=PERSON, model_args=MODEL)
    verdict = with_edits(Unchanged(approved), "approved", {"order": "A-17", "amount": 1.0},
                         editable=True)
    assert isinstance(verdict, Refusal) and verdict.kind == "conflict"


def test_an_approval_as_the_model_gave_it_after_an_edited_one_is_late():
    approved = gated("scheduled", args=PERSON, model_args=MODEL)
    verdict = with_edits(Unchanged(approved), "approved", None, editable=True)
    assert isinstance(verdict, Refusal) and verdict.kind == "conflict"


def test_the_model_reads_that_a_person_changed_the_arguments_beside_the_result():
    events = b.log(b.user("refund"), b.call("call1", name="refund", args=MODEL),
                   b._draft("resolution", {"tool_call_id": "call1", "status": "approved",
                                           "by": "bob", "args": PERSON, "model_args": MODEL}),
                   b.result("call1", output="refunded 129.90"))
    tool_message = render(b.view(events)).messages[-1]
    assert tool_message.role == "tool"
    assert tool_message.text == edit_note(PERSON) + "\nrefunded 129.90"
    assert "129.9" in edit_note(PERSON) and "a person changed the arguments" in edit_note(PERSON)


def test_a_result_of_unedited_arguments_reads_as_before():
    events = b.log(b.user("refund"), b.call("call1", name="refund", args=MODEL),
                   b._draft("resolution", {"tool_call_id": "call1", "status": "approved",
                                           "by": "bob"}),
                   b.result("call1", output="refunded 1299.00"))
    assert render(b.view(events)).messages[-1].text == "refunded 1299.00"
