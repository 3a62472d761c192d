"""post_message on a real store: a message mid-turn waits in the inbox and runs in
order, an idempotency key answers once, and on_busy=reject refuses and changes nothing."""
from __future__ import annotations

import pytest

from agentq.errors import Conflict, InvalidInput
from tests.support.drive import drain
from tests.support.turns import APPROVAL, SCOPE, start, types


def test_messages_that_arrive_mid_turn_wait_in_the_inbox_and_run_in_order(store, runtime, commands):
    conv = commands.create_conversation(SCOPE, {})
    first, follow1 = commands.post_message(conv.id, "one", SCOPE)
    second, follow2 = commands.post_message(conv.id, "two", SCOPE)
    assert not first.queued and second.queued
    drain(runtime, follow1 + follow2)
    texts = [(e.type, e.content.get("text")) for e in store.log.list_events(conv.id)]
    assert texts == [
        ("user_msg", "one"), ("assistant_msg", "echo: one"),
        ("user_msg", "two"), ("assistant_msg", "echo: two"),
    ]


def test_a_queued_message_starts_the_turn_its_answer_named(store, runtime, commands):
    conv = commands.create_conversation(SCOPE, {})
    first, follow1 = commands.post_message(conv.id, "one", SCOPE)
    second, follow2 = commands.post_message(conv.id, "two", SCOPE)
    assert second.queued and second.turn_id not in (None, first.turn_id)
    drain(runtime, follow1 + follow2)
    turns = [e.turn_id for e in store.log.list_events(conv.id) if e.type == "user_msg"]
    assert turns == [first.turn_id, second.turn_id]


def test_a_message_to_an_idle_conversation_queues_behind_one_still_waiting(store, runtime, commands):
    conv = commands.create_conversation(SCOPE, {})
    _, follow1 = commands.post_message(conv.id, "one", SCOPE)
    _, follow2 = commands.post_message(conv.id, "two", SCOPE)
    (advance,) = follow1
    later = runtime.advance(advance.conversation_id)  # the first turn ends; "two" still waits
    assert store.conversations.load(conv.id).fsm.state == "idle"
    third, follow3 = commands.post_message(conv.id, "three", SCOPE)
    assert third.queued
    drain(runtime, later + follow2 + follow3)
    users = [e.content["text"] for e in store.log.list_events(conv.id) if e.type == "user_msg"]
    assert users == ["one", "two", "three"]


def test_the_same_idempotency_key_returns_the_first_answer_and_appends_nothing(store, commands):
    conv = commands.create_conversation(SCOPE, {})
    first, _ = commands.post_message(conv.id, "hi", SCOPE, idempotency_key="k1")
    again, follow = commands.post_message(conv.id, "hi", SCOPE, idempotency_key="k1")
    assert again == first and follow == []
    assert types(store, conv.id) == ["user_msg"]


def test_reject_refuses_a_message_while_a_turn_runs_and_changes_nothing(store, runtime, commands):
    cid, _ = start(commands, runtime, APPROVAL)
    log = store.log.list_events(cid)
    with pytest.raises(Conflict, match="awaiting_input") as refused:
        commands.post_message(cid, "hello?", SCOPE, on_busy="reject")
    assert refused.value.details == {"state": "awaiting_input"}
    with pytest.raises(InvalidInput):
        commands.post_message(cid, "hello?", SCOPE, on_busy="shout")
    assert store.log.list_events(cid) == log and store.inbox.list_of(cid) == []
