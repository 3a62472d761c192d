"""Fast takeover with the default settings and real worker processes: no beat runs, so what
moves on is moved by the sweeper that wakes for the next deadline (in the timers worker).

The deployment's shape: a timers worker, and a worker of model calls and tools that is
killed (SIGKILL) or paused (SIGSTOP) mid-step while a new one starts at once. How fast it
moves is bench/takeover.py's to measure; the waits here are generous, yet shorter than the
old defaults' 30 s lease alone.
"""
from __future__ import annotations

import os
import signal

import pytest

from agentq.core.scope import Scope
from agentq.worker.tasks import enqueue
from tests.support.processes import wait_for
from tests.support.brokers import ON_EACH_BROKER, flush_broker

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis, ON_EACH_BROKER]

SCOPE = Scope(tenant="t1", user="u1")
DEFAULTS = {"AGENTQ_LEASE_S": "", "AGENTQ_SWEEP_S": ""}  # the embedded defaults: lease 6 s
STEPS = "agentq.model,agentq.tools"
TEXT = "one two three four five six seven eight"
MODEL = [{"text": TEXT, "chunks": 8, "delay_s": 4.0}]
TOOL = [{"tool_calls": [{"name": "slow_lookup", "args": {"key": "k", "seconds": 2}}]},
        {"text": "done"}]
WAIT = [{"tool_calls": [{"name": "approve_soon", "args": {"amount": 3}}]}, {"text": "moved on"}]


def begin(commands, broker, script):
    conv = commands.create_conversation(SCOPE, {"script": script})
    _, follow = commands.post_message(conv.id, "go", SCOPE)
    enqueue(broker, follow)
    return conv.id


def step_of(store, cid, kind):
    return next((s for s in store.steps.list_of(cid) if s.kind == kind), None)


def events(store, cid):
    return store.log.list_events(cid)


def idle(store, cid, rounds):
    info = store.conversations.load(cid)
    return info.fsm.state == "idle" and info.fsm.rounds >= rounds


def test_killed_workers_model_call_tool_call_and_lost_expiry_all_move_on_with_the_defaults(
    pg_store_clean, commands, broker, workers, broker_url, tmp_path
):
    store = pg_store_clean
    tool_log = tmp_path / "tool.log"
    tool_log.touch()
    timers = workers("timers1", queues="agentq.timers", **DEFAULTS)
    first = workers("w1", queues=STEPS, AGENTQ_TEST_TOOL_LOG=str(tool_log), **DEFAULTS)
    streaming, tooling, waiting = (begin(commands, broker, s) for s in (MODEL, TOOL, WAIT))
    wait_for(lambda: tool_log.read_text(), what="the tool to start")
    model_step = wait_for(lambda: (s := step_of(store, streaming, "llm")) and
                          s.status == "running" and s, what="the model call to start")
    wait_for(lambda: store.calls.list_of(waiting, status="pending"), what="a pending call")
    first.kill()  # mid-tool and mid-stream
    timers.kill()  # it held the expiry's ETA task
    flush_broker(broker_url)  # and the broker loses every task, ETA tasks included
    workers("w2", queues=STEPS, AGENTQ_TEST_TOOL_LOG=str(tool_log), **DEFAULTS)
    workers("timers2", queues="agentq.timers", **DEFAULTS)

    wait_for(lambda: store.steps.load(model_step.step_key).attempts == 2, timeout_s=25,
             what="the model call to be taken over")
    for cid, rounds in ((streaming, 1), (tooling, 2), (waiting, 2)):
        wait_for(lambda: idle(store, cid, rounds), timeout_s=45, what="every turn to finish")
    answers = [e for e in events(store, streaming) if e.type == "assistant_msg"]
    assert [(a.content["text"], a.round_id) for a in answers] == [(TEXT, model_step.round_id)]
    (call_id,) = {e.content["tool_call_id"] for e in events(store, tooling) if e.type == "tool_call"}
    assert tool_log.read_text().split() == [call_id, call_id]  # the same call, run again
    assert [e.type for e in events(store, tooling)] == [
        "user_msg", "assistant_msg", "tool_call", "tool_result", "assistant_msg"]
    resolution = next(e for e in events(store, waiting) if e.type == "resolution")
    assert resolution.content["status"] == "expired" and resolution.content["by"] == "system"
    assert events(store, waiting)[-1].content["text"] == "moved on"


def test_a_worker_paused_past_its_lease_and_resumed_commits_nothing_twice(
    pg_store_clean, commands, broker, workers, tmp_path
):
    store = pg_store_clean
    tool_log = tmp_path / "tool.log"
    tool_log.touch()
    workers("timers", queues="agentq.timers", **DEFAULTS)
    paused = workers("w1", queues=STEPS, AGENTQ_TEST_TOOL_LOG=str(tool_log), **DEFAULTS)
    tooling = begin(commands, broker, [
        {"tool_calls": [{"name": "slow_lookup", "args": {"key": "k", "seconds": 8}}]},
        {"text": "done"}])
    streaming = begin(commands, broker, [{"text": TEXT, "chunks": 8, "delay_s": 8.0}])
    wait_for(lambda: tool_log.read_text(), what="the tool to start")
    model_step = wait_for(lambda: (s := step_of(store, streaming, "llm")) and
                          s.status == "running" and s, what="the model call to start")
    os.killpg(paused.pid, signal.SIGSTOP)  # alive, but silent: a long GC pause, say
    try:
        workers("w2", queues=STEPS, AGENTQ_TEST_TOOL_LOG=str(tool_log), **DEFAULTS)
        tool_step = step_of(store, tooling, "tool")
        wait_for(lambda: store.steps.load(tool_step.step_key).attempts == 2, timeout_s=25,
                 what="the tool step to be taken over")
        wait_for(lambda: store.steps.load(model_step.step_key).attempts == 2, timeout_s=25,
                 what="the model call to be taken over")
    finally:
        os.killpg(paused.pid, signal.SIGCONT)  # its tool returns and its stream goes on: both late
    for cid, rounds in ((tooling, 2), (streaming, 1)):
        wait_for(lambda: idle(store, cid, rounds), timeout_s=45, what="both turns to finish")
    assert paused.alive()
    # It ran twice, the second time after the first's lease ran out; the second run took longer
    # than a lease and kept it (attempts stayed at 2).
    assert len(tool_log.read_text().split()) == 2
    assert [e.type for e in events(store, tooling)] == [
        "user_msg", "assistant_msg", "tool_call", "tool_result", "assistant_msg"]
    assert [e.type for e in events(store, streaming)] == ["user_msg", "assistant_msg"]
    assert store.steps.load(tool_step.step_key).attempts == 2
    for cid in (tooling, streaming):
        assert all(s.status == "succeeded" for s in store.steps.list_of(cid))
