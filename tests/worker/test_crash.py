"""Durability with real processes: workers killed with SIGKILL, a flushed broker, racing deliveries.

Every test starts worker (and beat) processes on a real broker and Postgres (each test that is
about the broker losing or redelivering work runs on Redis and on RabbitMQ),
kills some of them mid-step, starts others, and reads the log afterwards.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from agentq.core.scope import Scope
from agentq.worker.tasks import enqueue
from tests.support.processes import ROOT, wait_for
from tests.support.brokers import ON_EACH_BROKER, flush_broker

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

SCOPE = Scope(tenant="t1", user="u1")


def begin(commands, broker, script, text="go"):
    conv = commands.create_conversation(SCOPE, {"script": script})
    _, follow = commands.post_message(conv.id, text, SCOPE)
    enqueue(broker, follow)
    return conv.id


def finished(store, cid, rounds):
    info = store.conversations.load(cid)
    return info.fsm.state == "idle" and info.fsm.rounds >= rounds


def kinds(store, cid):
    return [e.type for e in store.log.list_events(cid)]


def running_step(store, cid, kind):
    return next((s for s in store.steps.list_of(cid) if s.kind == kind and s.status == "running"), None)


@ON_EACH_BROKER
def test_a_worker_killed_while_the_model_streams_is_replaced_and_the_round_answers_once(
    pg_store_clean, commands, broker, workers, beat
):
    store = pg_store_clean
    text = "one two three four five six seven eight"
    cid = begin(commands, broker, [{"text": text, "chunks": 8, "delay_s": 3.0}])
    first = workers("w1")
    step = wait_for(lambda: running_step(store, cid, "llm"), what="the model call to start")
    time.sleep(1.0)  # mid-stream
    first.kill()
    workers("w2")
    beat()
    wait_for(lambda: finished(store, cid, 1), timeout_s=60, what="the turn to finish")
    answers = [e for e in store.log.list_events(cid) if e.type == "assistant_msg"]
    assert len(answers) == 1 and answers[0].content["text"] == text
    assert answers[0].round_id == step.round_id
    assert store.steps.load(step.step_key).attempts == 2


@ON_EACH_BROKER
def test_a_worker_killed_during_a_tool_call_is_replaced_and_the_same_call_runs_again_without_a_new_model_round(
    pg_store_clean, commands, broker, workers, beat, tmp_path
):
    """docs/design.md §16.1, "restart loop on resume": recovery continues from the open call."""
    store = pg_store_clean
    tool_log = tmp_path / "tool.log"
    tool_log.touch()
    script = [
        {"tool_calls": [{"name": "slow_lookup", "args": {"key": "k", "seconds": 3}}]},
        {"text": "done"},
    ]
    cid = begin(commands, broker, script)
    first = workers("w1", AGENTQ_TEST_TOOL_LOG=str(tool_log))
    wait_for(lambda: tool_log.read_text(), what="the tool to start")
    first.kill()
    workers("w2", AGENTQ_TEST_TOOL_LOG=str(tool_log))
    beat()
    wait_for(lambda: finished(store, cid, 2), timeout_s=60, what="the turn to finish")
    (call_id,) = {e.content["tool_call_id"] for e in store.log.list_events(cid) if e.type == "tool_call"}
    assert tool_log.read_text().split() == [call_id, call_id]
    assert kinds(store, cid) == ["user_msg", "assistant_msg", "tool_call", "tool_result", "assistant_msg"]
    llm_steps = [s for s in store.steps.list_of(cid) if s.kind == "llm"]
    assert len(llm_steps) == 2 and all(s.attempts == 1 for s in llm_steps)


@ON_EACH_BROKER
def test_a_worker_killed_after_its_commit_but_before_the_enqueue_still_lets_the_turn_finish(
    pg_store_clean, commands, broker, workers, beat, tmp_path
):
    store = pg_store_clean
    flag = tmp_path / "crash-once"
    flag.touch()
    script = [{"tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}]}, {"text": "cold"}]
    cid = begin(commands, broker, script)
    first = workers("w1", include="tests.support.crash_after_commit", CRASH_ONCE_FLAG=str(flag))
    wait_for(lambda: not first.alive(), what="the worker to crash after the commit")
    assert first.proc.returncode == 137 and not flag.exists()
    assert kinds(store, cid)[:3] == ["user_msg", "assistant_msg", "tool_call"]
    workers("w2")
    beat()
    wait_for(lambda: finished(store, cid, 2), timeout_s=60, what="the turn to finish")
    assert kinds(store, cid) == ["user_msg", "assistant_msg", "tool_call", "tool_result", "assistant_msg"]


@ON_EACH_BROKER
def test_a_pending_call_still_expires_after_the_broker_is_flushed_while_workers_are_down(
    pg_store_clean, commands, broker, workers, beat, broker_url
):
    store = pg_store_clean
    script = [{"tool_calls": [{"name": "quick_approve", "args": {"amount": 3}}]}, {"text": "moved on"}]
    cid = begin(commands, broker, script)
    first = workers("w1")
    wait_for(lambda: store.conversations.load(cid).fsm.state == "awaiting_input",
             what="the call to be pending")
    first.kill()
    flush_broker(broker_url)  # the ETA task that would expire the call is gone
    time.sleep(3.5)
    workers("w2")
    beat()
    wait_for(lambda: finished(store, cid, 2), timeout_s=60, what="the call to expire")
    events = store.log.list_events(cid)
    resolution = next(e for e in events if e.type == "resolution")
    assert resolution.content["status"] == "expired" and resolution.content["by"] == "system"
    assert events[-1].content["text"] == "moved on"


@ON_EACH_BROKER
def test_the_same_advance_delivered_five_times_at_once_appends_every_event_once(
    pg_store_clean, commands, broker, workers
):
    store = pg_store_clean
    conv = commands.create_conversation(SCOPE, {"script": [
        {"tool_calls": [{"name": "lookup", "args": {"key": "a"}}], "delay_s": 0.3, "chunks": 3},
        {"text": "done", "delay_s": 0.3, "chunks": 3},
    ]})
    _, follow = commands.post_message(conv.id, "go", SCOPE)
    workers("w1", concurrency=8)
    enqueue(broker, follow * 5)
    wait_for(lambda: finished(store, conv.id, 2), timeout_s=60, what="the turn to finish")
    time.sleep(1.0)  # let the losing deliveries finish too
    assert kinds(store, conv.id) == [
        "user_msg", "assistant_msg", "tool_call", "tool_result", "assistant_msg"
    ]
    assert all(s.attempts == 1 and s.status == "succeeded" for s in store.steps.list_of(conv.id))


def test_transient_failures_are_retried_and_a_permanent_one_fails_the_conversation(
    pg_store_clean, commands, broker, workers
):
    store = pg_store_clean
    flaky = begin(commands, broker, [{"text": "made it", "fail": {"status": 503, "times": 2}}])
    broken = begin(commands, broker, [{"text": "never", "fail": {"status": 400, "times": 1}}])
    workers("w1")
    wait_for(lambda: finished(store, flaky, 1), timeout_s=60, what="the flaky turn")
    wait_for(lambda: store.conversations.load(broken).fsm.state == "failed", what="the failure")
    (step,) = store.steps.list_of(flaky)
    assert step.retries == 2 and step.status == "succeeded"
    assert kinds(store, broken) == ["user_msg", "error"]
    error = store.log.list_events(broken)[1].content
    assert error["status"] == "failed_permanent" and error["step_key"]


@ON_EACH_BROKER
def test_fifty_conversations_on_two_workers_all_finish_and_keep_every_invariant(
    pg_store_clean, commands, broker, workers, pg_url
):
    store = pg_store_clean
    script = [{"tool_calls": [{"name": "lookup", "args": {"key": "x"}}]}, {"text": "ok"}]
    ids = [begin(commands, broker, script, text=f"question {i}") for i in range(50)]
    started = [workers("w1"), workers("w2")]

    def unfinished() -> str:
        """What the conversations still under way wait for, and the workers' last words."""
        stuck = [cid for cid in ids if not finished(store, cid, 2)]
        lines = [f"{len(stuck)} unfinished"]
        for cid in stuck[:5]:
            steps = [(s.kind, s.status, s.attempts, s.worker) for s in store.steps.list_of(cid)]
            lines.append(f"{cid}: {kinds(store, cid)} {store.conversations.load(cid).fsm} {steps}")
        lines += [f"--- {w.name}:\n{w.log_text()[-4000:]}" for w in started]
        return "\n".join(lines)

    wait_for(lambda: all(finished(store, cid, 2) for cid in ids), timeout_s=180,
             what=lambda: f"fifty conversations to finish: {unfinished()}")
    for cid in ids:
        assert kinds(store, cid) == [
            "user_msg", "assistant_msg", "tool_call", "tool_result", "assistant_msg"
        ]
    check = subprocess.run(
        [sys.executable, "-m", "agentq.cli", "check", "--all"],
        env={**os.environ, "AGENTQ_DATABASE_URL": pg_url}, cwd=ROOT,
        capture_output=True, text=True, timeout=120,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "ok" in check.stdout


@ON_EACH_BROKER
def test_a_turn_interrupted_while_a_worker_streams_ends_once_and_the_queued_message_runs_next(
    pg_store_clean, commands, broker, workers
):
    store = pg_store_clean
    text = "one two three four five six seven eight"
    cid = begin(commands, broker, [{"text": text, "chunks": 8, "delay_s": 6.0}, {"text": "next one"}])
    worker = workers("w1")
    step = wait_for(lambda: running_step(store, cid, "llm"), what="the model call to start")
    queued, _ = commands.post_message(cid, "after that", SCOPE)
    assert queued.queued
    enqueue(broker, commands.cancel(cid, SCOPE))  # the next turn starts through the broker
    wait_for(lambda: finished(store, cid, 1) and kinds(store, cid).count("assistant_msg") == 2,
             timeout_s=60, what=f"the queued turn to finish; worker log:\n{worker.log_text()}")
    answers = [e for e in store.log.list_events(cid) if e.type == "assistant_msg"]
    assert answers[0].round_id == step.round_id and answers[0].content["interrupted"] is True
    assert answers[1].content["interrupted"] is False and answers[1].round_id != step.round_id
    assert [e.content["text"] for e in store.log.list_events(cid) if e.type == "user_msg"] == ["go", "after that"]
    assert store.steps.load(step.step_key).attempts == 1  # the interrupted call was not run again
