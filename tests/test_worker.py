"""The runtime through a real Celery worker process on the real Redis broker and Postgres."""
from __future__ import annotations

import pytest

from agentq.tools import Scope
from agentq.worker import enqueue
from tests.cluster import broker, commands, workers  # noqa: F401  (fixtures)
from tests.processes import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

SCOPE = Scope(tenant="t1", user="u1")


def test_a_turn_with_a_server_tool_completes_on_a_real_worker(pg_store_clean, commands, broker, workers):
    store = pg_store_clean
    conv = commands.create_conversation(SCOPE, {"script": [
        {"text": "Checking.", "tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}],
         "chunks": 3},
        {"text": "Cold.", "chunks": 2},
    ]})
    worker = workers("w1")
    _, follow = commands.post_message(conv.id, "weather?", SCOPE)
    enqueue(broker, follow)
    wait_for(lambda: store.load_conversation(conv.id).fsm.rounds == 2
             and store.load_conversation(conv.id).fsm.state == "idle",
             timeout_s=60, what=f"the turn to finish; worker log:\n{worker.log_text()}")
    events = store.list_events(conv.id)
    assert [e.type for e in events] == [
        "user_msg", "assistant_msg", "tool_call", "tool_result", "assistant_msg"
    ]
    rounds = [e.round_id for e in events if e.type == "assistant_msg"]
    assert len(set(rounds)) == 2
    assert events[2].round_id == rounds[0]
    assert {s.status for s in store.list_steps(conv.id)} == {"succeeded"}
