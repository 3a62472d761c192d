"""Approval-gated calls with real worker processes on Redis and Postgres: approved, a call
runs once with the arguments the person saw (also when the worker dies right after the
approval and the broker loses its task); rejected or expired, it never runs."""
from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest
import redis

from agentq.core.render import render
from agentq.core.scope import Scope
from agentq.worker.tasks import enqueue
from tests.support.processes import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

ALICE = Scope(tenant="t1", user="alice")
PERSON = Scope(tenant="t1", user="bob")
REFUND = [
    {"text": "Refunding.",
     "tool_calls": [{"name": "issue_refund", "args": {"order": "A-17", "amount": 1299.0}}]},
    {"text": "Done."},
]


def begin(commands, broker, script):
    conv = commands.create_conversation(ALICE, {"script": script})
    _, follow = commands.post_message(conv.id, "refund order A-17", ALICE)
    enqueue(broker, follow)
    return conv.id


def pending_call(store, cid):
    pending = wait_for(lambda: store.conversations.load(cid).fsm.pending,
                       what="the call to wait for approval")
    (call_id,) = pending
    return store.calls.load(cid, call_id)


def finished(store, cid):
    info = store.conversations.load(cid)
    return info.fsm.state == "idle" and info.fsm.rounds >= 2


def runs(tool_log):
    return [json.loads(line) for line in tool_log.read_text().splitlines()]


def test_an_approved_call_runs_once_on_a_worker_with_the_approved_arguments(
    pg_store_clean, commands, broker, workers, tmp_path
):
    store, tool_log = pg_store_clean, tmp_path / "tool.log"
    tool_log.touch()
    cid = begin(commands, broker, REFUND)
    workers("w1", AGENTQ_TEST_TOOL_LOG=str(tool_log))
    call = pending_call(store, cid)
    assert runs(tool_log) == []
    _, follow = commands.resolve(cid, call.id, PERSON, status="approved", result=None)
    enqueue(broker, follow + follow)  # delivered twice: still one run
    wait_for(lambda: finished(store, cid), what="the turn to finish")
    assert runs(tool_log) == [{"call": call.id, "order": "A-17", "amount": 1299.0}]


def test_an_approval_survives_the_worker_killed_right_after_it_and_a_flushed_broker(
    pg_store_clean, commands, broker, workers, beat, redis_url, tmp_path
):
    store, tool_log = pg_store_clean, tmp_path / "tool.log"
    tool_log.touch()
    cid = begin(commands, broker, REFUND)
    first = workers("w1", AGENTQ_TEST_TOOL_LOG=str(tool_log))
    call = pending_call(store, cid)
    commands.resolve(cid, call.id, PERSON, status="approved", result=None)
    first.kill()  # the approval is committed; its run_tool task is never sent
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    client.set("agentq:test-claim", "flushed", ex=7200)  # keep this db claimed for the run
    client.close()
    time.sleep(2.5)  # past the sweeper's grace
    workers("w2", AGENTQ_TEST_TOOL_LOG=str(tool_log))
    beat()
    wait_for(lambda: finished(store, cid), what="the sweeper to run the approved call")
    assert runs(tool_log) == [{"call": call.id, "order": "A-17", "amount": 1299.0}]
    kinds = [e.type for e in store.log.list_events(cid)]
    assert kinds == ["user_msg", "assistant_msg", "tool_call", "suspension", "resolution",
                     "tool_result", "assistant_msg"]


def test_a_rejected_call_never_runs_on_a_worker_and_the_next_model_call_reads_why(
    pg_store_clean, commands, broker, workers, tmp_path
):
    store, tool_log = pg_store_clean, tmp_path / "tool.log"
    tool_log.touch()
    cid = begin(commands, broker, REFUND)
    workers("w1", AGENTQ_TEST_TOOL_LOG=str(tool_log))
    call = pending_call(store, cid)
    _, follow = commands.resolve(cid, call.id, PERSON, status="rejected", result=None,
                                 reason="the order lookup said 129.90 EUR")
    enqueue(broker, follow)
    wait_for(lambda: finished(store, cid), what="the turn to finish")
    assert runs(tool_log) == []
    answer = store.log.list_events(cid)[-1]
    assert answer.type == "assistant_msg" and answer.content["text"] == "Done."
    # what the model was sent for that answer: the log before it, rendered (deterministic)
    view = store.log.load_view(cid)
    before = replace(view, events=tuple(e for e in view.events if e.seq < answer.seq))
    refusal = next(m for m in render(before).messages if m.role == "tool")
    assert refusal.is_error and "refused" in refusal.text and "129.90 EUR" in refusal.text


def test_a_call_nobody_approves_in_time_is_refused_by_the_system_and_never_runs(
    pg_store_clean, commands, broker, workers, beat
):
    from tests.support import tools_for_tests

    store = pg_store_clean
    script = [{"tool_calls": [{"name": "quick_refund", "args": {"order": "B-2", "amount": 9.5}}]},
              {"text": "It was not approved."}]
    cid = begin(commands, broker, script)
    workers("w1")
    beat()
    call = pending_call(store, cid)
    wait_for(lambda: finished(store, cid), what="the call to expire")
    assert store.calls.load(cid, call.id).status == "expired"
    result = next(e for e in store.log.list_events(cid) if e.type == "tool_result")
    assert result.content["status"] == "expired"
    assert "refused by the system" in result.content["output"]
    assert "quick_refund:B-2" not in tools_for_tests.CALLS  # nor in this process
