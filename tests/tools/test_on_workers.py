"""Tools on real Celery worker processes, one test body per pool the README documents."""
from __future__ import annotations

import pytest

from agentq.core.scope import Scope
from agentq.worker.tasks import enqueue
from tests.support.processes import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

SCOPE = Scope(tenant="t1", user="u1")


@pytest.mark.parametrize("pool", ["threads", "gevent", "prefork", "solo"])
def test_an_async_tool_is_awaited_and_a_raising_tools_traceback_is_in_the_worker_log(
        pool, pg_store_clean, commands, broker, workers):
    store = pg_store_clean
    conv = commands.create_conversation(SCOPE, {"script": [
        {"tool_calls": [{"name": "async_lookup", "args": {"key": "k1"}},
                        {"name": "explode", "args": {}}]},
        {"text": "done"},
    ]})
    worker = workers(f"{pool}1", pool=pool, concurrency=1 if pool == "solo" else 4)
    enqueue(broker, commands.post_message(conv.id, "look it up", SCOPE)[1])
    wait_for(lambda: store.conversations.load(conv.id).fsm.state == "idle"
             and store.conversations.load(conv.id).fsm.rounds == 2,
             timeout_s=60, what=f"the turn; worker log:\n{worker.log_text()}")
    outputs = {e.content["tool_call_id"]: e.content for e in store.log.list_events(conv.id)
               if e.type == "tool_result"}
    calls = {c.name: c.id for c in store.calls.list_of(conv.id)}
    assert outputs[calls["async_lookup"]]["output"] == "async value of K1"
    assert outputs[calls["explode"]] == {**outputs[calls["explode"]], "status": "error",
                                         "output": "RuntimeError: the tool exploded"}
    log = wait_for(lambda: "the tool exploded" in worker.log_text() and worker.log_text(),
                   what="the tool's failure in the worker log")
    assert "WARNING agentq.tools: tool explode raised RuntimeError: the tool exploded" in log
    assert "Traceback (most recent call last)" in log
    assert 'raise RuntimeError("the tool exploded")' in log
    assert f"conversation_id={conv.id}" in log and f"tool_call_id={calls['explode']}" in log
