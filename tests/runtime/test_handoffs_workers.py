"""Handoffs with real worker processes: a worker SIGKILLed right after the commit that
recorded a handoff, or while the model step that makes it streams, and the handoff is
recorded once; the chain goes on to its last agent."""
from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from agentq.core.agents import AgentDefinition
from agentq.core.scope import Scope
from agentq.core.settings import Settings
from agentq.worker.tasks import enqueue
from tests.support.processes import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

SCOPE = Scope(tenant="t1", user="u1")


def transfer(to: str, **slow) -> dict:
    return {"text": f"passing you to {to}",
            "tool_calls": [{"name": f"transfer_to_{to}", "args": {"reason": f"{to} knows"}}],
            **slow}


def chain(store, *, slow: dict | None = None) -> None:
    """a hands to b (slowly, with `slow`), b to c, c answers."""
    def define(name: str, **settings) -> None:
        store.agents.create("t1", AgentDefinition(name=name, settings=Settings(**settings)),
                            now=datetime.now(UTC))

    define("c", script=[{"text": "C answers"}], script_repeat=True)
    define("b", script=[transfer("c")], script_repeat=True, handoffs=["c"])
    define("a", script=[transfer("b", **(slow or {}))], handoffs=["b"])


def begin(commands) -> str:
    conv = commands.create_conversation(SCOPE, {}, agent="a")
    return conv.id


def handoffs(store, cid) -> list[tuple[str, str]]:
    return [(e.content["from"], e.content["to"]) for e in store.log.list_events(cid)
            if e.type == "handoff"]


def answered(store, cid) -> bool:
    info = store.conversations.load(cid)
    return info.fsm.state == "idle" and info.fsm.agent is not None and info.fsm.agent["name"] == "c"


def test_a_worker_killed_right_after_committing_a_handoff_leaves_it_recorded_once(
    pg_store_clean, commands, broker, workers, beat, tmp_path
):
    store = pg_store_clean
    chain(store)
    cid = begin(commands)
    flag = tmp_path / "crash-once"
    flag.touch()
    _, follow = commands.post_message(cid, "charged twice", SCOPE)
    enqueue(broker, follow)
    first = workers("w1", include="tests.support.crash_after_commit", CRASH_ONCE_FLAG=str(flag))
    wait_for(lambda: not first.alive(), what="the worker to die after the handoff's commit")
    assert first.proc.returncode == 137 and not flag.exists()
    assert handoffs(store, cid) == [("a", "b")]  # committed; its follow-up never sent
    workers("w2")
    beat()
    wait_for(lambda: answered(store, cid), timeout_s=60, what="c to answer")
    assert handoffs(store, cid) == [("a", "b"), ("b", "c")]
    texts = [e.content["text"] for e in store.log.list_events(cid) if e.type == "assistant_msg"]
    assert texts == ["passing you to b", "passing you to c", "C answers"]


def test_a_worker_killed_while_the_handing_model_step_streams_hands_over_once(
    pg_store_clean, commands, broker, workers, beat
):
    store = pg_store_clean
    chain(store, slow={"chunks": 6, "delay_s": 3.0})
    cid = begin(commands)
    _, follow = commands.post_message(cid, "charged twice", SCOPE)
    enqueue(broker, follow)
    first = workers("w1")
    step = wait_for(lambda: next((s for s in store.steps.list_of(cid)
                                  if s.kind == "llm" and s.status == "running"), None),
                    what="a's model step to stream")
    time.sleep(1.0)  # mid-stream, before its commit
    first.kill()
    assert handoffs(store, cid) == []
    workers("w2")
    beat()
    wait_for(lambda: answered(store, cid), timeout_s=90, what="c to answer")
    assert handoffs(store, cid) == [("a", "b"), ("b", "c")]
    assert store.steps.load(step.step_key).attempts == 2  # the step ran again, once
    (transfer_call,) = [c for c in store.calls.list_of(cid) if c.name == "transfer_to_b"]
    assert transfer_call.status == "done"
