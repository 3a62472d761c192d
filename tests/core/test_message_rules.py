"""The rules of a posted message (agentq.core.message_rules): one test per rule and verdict."""
from __future__ import annotations

from datetime import timedelta

from agentq.core.events import FsmState
from agentq.core.message_rules import (
    Append,
    LockedConversation,
    MessageRequest,
    Queue,
    Replay,
    classify_message,
    message_request,
    request_hash,
)
from agentq.core.refusal import Refusal
from tests.support.clock import T0

MAX_IMAGE_BYTES = 1024


def request(content="hi", on_busy="enqueue", key=None) -> MessageRequest:
    made = message_request(content, on_busy, idempotency_key=key)
    assert isinstance(made, MessageRequest)
    return made


def conversation(state="idle", *, status="active", replayed=None, inbox_waiting=False,
                 pending=None, running=()) -> LockedConversation:
    fsm = FsmState(state=state, pending=pending or {}, running=running)
    return LockedConversation(status=status, fsm=fsm, max_image_bytes=MAX_IMAGE_BYTES,
                              replayed=replayed, inbox_waiting=inbox_waiting)


def test_empty_text_is_refused_before_anything_is_read():
    assert message_request("  ", "enqueue") == Refusal.invalid("content must not be empty")


def test_an_unknown_on_busy_is_refused_before_anything_is_read():
    refused = message_request("hi", "shout")
    assert isinstance(refused, Refusal) and refused.kind == "invalid_input"
    assert "on_busy must be one of enqueue, interrupt, reject" in refused.message


def test_a_request_carries_the_hash_of_what_it_said():
    made = request("hi", "interrupt")
    assert made.request_hash == request_hash("hi", "interrupt", None)
    assert made.request_hash != request_hash("hi", "enqueue", None)
    assert request_hash("hi", "enqueue", T0) != request_hash("hi", "enqueue", T0 + timedelta(seconds=1))


def test_content_that_breaks_a_rule_of_the_parts_is_invalid_content():
    verdict = classify_message(request([{"type": "video"}]), conversation())
    assert isinstance(verdict, Refusal)
    assert (verdict.kind, verdict.code) == ("invalid_input", "invalid_content")


def test_a_replayed_key_with_the_same_request_gives_the_first_answer():
    made = request(key="k1")
    first = {"message_id": "m1", "turn_id": "t1", "queued": False, "request_hash": made.request_hash}
    verdict = classify_message(made, conversation("running", replayed=first))
    assert verdict == Replay({"message_id": "m1", "turn_id": "t1", "queued": False})


def test_a_key_first_used_before_requests_were_hashed_replays_its_answer():
    first = {"message_id": "m1", "turn_id": None, "queued": True, "request_hash": None}
    verdict = classify_message(request(key="k1"), conversation(replayed=first))
    assert verdict == Replay({"message_id": "m1", "turn_id": None, "queued": True})


def test_a_key_replayed_with_another_request_is_refused():
    first = {"message_id": "m1", "turn_id": "t1", "queued": False, "request_hash": "other"}
    verdict = classify_message(request(key="k1"), conversation(replayed=first))
    assert isinstance(verdict, Refusal) and verdict.code == "idempotency_key_reused"


def test_an_ended_conversation_refuses_a_message_and_says_it_ended():
    verdict = classify_message(request(), conversation("idle", status="ended"))
    assert verdict == Refusal.conflict("the conversation has ended", details={"state": "ended"})


def test_a_message_to_an_idle_conversation_starts_a_turn():
    assert classify_message(request(), conversation("idle")) == Append({"text": "hi"}, close_turn=False)


def test_a_message_to_an_idle_conversation_queues_behind_one_still_waiting():
    assert classify_message(request(), conversation("idle", inbox_waiting=True)) == Queue({"text": "hi"})


def test_a_message_to_a_failed_conversation_closes_its_turn_first_if_calls_are_open():
    verdict = classify_message(request(), conversation("failed", running=("c1",)))
    assert verdict == Append({"text": "hi"}, close_turn=True)


def test_a_message_to_a_failed_conversation_with_nothing_open_starts_a_turn():
    assert classify_message(request(), conversation("failed")) == Append({"text": "hi"}, close_turn=False)


def test_enqueue_queues_a_message_while_a_turn_runs():
    assert classify_message(request(), conversation("running")) == Queue({"text": "hi"})


def test_interrupt_closes_the_running_turn_and_starts_one():
    verdict = classify_message(request(on_busy="interrupt"), conversation("awaiting_input"))
    assert verdict == Append({"text": "hi"}, close_turn=True)


def test_reject_refuses_a_message_while_a_turn_runs_and_says_its_state():
    verdict = classify_message(request(on_busy="reject"), conversation("awaiting_input"))
    assert verdict == Refusal.conflict(
        "a turn is awaiting_input; message rejected (on_busy=reject)",
        details={"state": "awaiting_input"})
