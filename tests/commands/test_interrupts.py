"""post_message with on_busy=interrupt on a real store: the partial answer is kept, open
human calls are cancelled, and the next turn starts with a new round."""
from __future__ import annotations

import threading
import time

import pytest

from agentq.cli.check import check_conversation
from agentq.errors import Conflict
from tests.support.drive import drain
from tests.support.turns import APPROVAL, SCOPE, start


def _stream_in_thread(runtime, cid):
    """Run one advance (a slow model call) in a thread, like a worker would."""
    out: list = []
    thread = threading.Thread(target=lambda: out.extend(runtime.advance(cid)))
    thread.start()
    return thread, out


def _wait_for(predicate, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.01)
    raise TimeoutError("condition not met")


SLOW = [{"text": "one two three four five six seven eight nine ten", "chunks": 10, "delay_s": 3.0}]


def test_an_interrupt_keeps_the_partial_answer_and_starts_the_next_turn_with_a_new_round(
    store, runtime, commands
):
    conv = commands.create_conversation(SCOPE, {"script": SLOW})
    commands.post_message(conv.id, "talk", SCOPE)
    thread, out = _stream_in_thread(runtime, conv.id)
    deltas = lambda: [d for k, d in runtime.pubsub.notices if k == "delta"]
    _wait_for(lambda: len(deltas()) >= 2)
    answer, follow = commands.post_message(conv.id, "stop, new question", SCOPE, on_busy="interrupt")
    thread.join(timeout=5)
    assert not thread.is_alive() and out == []  # the stream was closed, its commit dropped
    assert not answer.queued and answer.turn_id
    assert len(deltas()) < 10
    drain(runtime, follow)
    events = store.log.list_events(conv.id)
    assert [e.type for e in events] == ["user_msg", "assistant_msg", "user_msg", "assistant_msg"]
    kept, fresh = events[1], events[3]
    assert kept.content["interrupted"] is True
    assert kept.content["text"] and SLOW[0]["text"].startswith(kept.content["text"])
    assert fresh.content["text"] == "echo: stop, new question"
    assert fresh.content["interrupted"] is False
    first_round = {d["round_id"] for d in deltas() if d["turn_id"] == events[0].turn_id}
    assert first_round == {kept.round_id} and fresh.round_id != kept.round_id
    llm_steps = {s.round_id: s.status for s in store.steps.list_of(conv.id) if s.kind == "llm"}
    assert llm_steps[kept.round_id] == "cancelled"
    assert check_conversation(store, conv.id) == []  # the dropped commit left no trace


def test_an_interrupt_cancels_pending_human_calls_and_a_late_resolution_conflicts(
    store, runtime, commands
):
    cid, _ = start(commands, runtime, APPROVAL)
    (call_id,) = store.conversations.load(cid).fsm.pending
    _, follow = commands.post_message(cid, "never mind", SCOPE, on_busy="interrupt")
    drain(runtime, follow)
    events = store.log.list_events(cid)
    assert [e.type for e in events][4:] == [
        "assistant_msg", "resolution", "tool_result", "user_msg", "assistant_msg"
    ]
    assert events[5].content["status"] == "cancelled" and events[6].content["status"] == "cancelled"
    with pytest.raises(Conflict, match="cancelled"):
        commands.resolve(cid, call_id, SCOPE, status="resolved", result={"ok": True})
