"""The model worker of the default deployment: `celery worker -P gevent`, hundreds of model
calls in flight in one process, kept durable when it is killed in the middle of them.
"""
from __future__ import annotations

from collections import Counter

import pytest

from agentq.core.scope import Scope
from agentq.worker.tasks import enqueue
from tests.support.processes import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

SCOPE = Scope(tenant="t1", user="u1")
IN_FLIGHT = 200


def running_llm_steps(store) -> int:
    with store.engine.connect() as conn:
        return conn.exec_driver_sql(
            "SELECT count(*) FROM steps WHERE kind = 'llm' AND status = 'running'").scalar()


def test_a_green_worker_killed_with_hundreds_of_model_calls_in_flight_loses_none_and_rerolls_none(
    pg_store_clean, commands, broker, workers, beat
):
    store = pg_store_clean
    script = [
        {"text": "checking", "tool_calls": [{"name": "lookup", "args": {"key": "k"}}],
         "chunks": 4, "delay_s": 10.0},
        {"text": "done"},
    ]
    ids = []
    for i in range(IN_FLIGHT):
        cid = commands.create_conversation(SCOPE, {"script": script}).id
        enqueue(broker, commands.post_message(cid, f"question {i}", SCOPE)[1])
        ids.append(cid)
    # Leases longer than the suite's 2 s (hundreds of claims at once on a loaded machine),
    # and a sweep that re-drives each stale step once before the worker can take it up
    slow_start = {"AGENTQ_LEASE_S": "6", "AGENTQ_SWEEP_S": "5"}
    first = workers("green1", concurrency=1000, pool="gevent", **slow_start)
    wait_for(lambda: running_llm_steps(store) >= IN_FLIGHT * 0.8, timeout_s=90,
             what="hundreds of model calls in flight in one process")
    first.kill()
    workers("green2", concurrency=1000, pool="gevent", **slow_start)
    beat(**slow_start)

    def all_finished() -> bool:
        with store.engine.connect() as conn:
            idle = conn.exec_driver_sql(
                "SELECT count(*) FROM conversations WHERE next_seq = 6").scalar()
        return idle == IN_FLIGHT

    try:
        wait_for(all_finished, timeout_s=180, what="every turn to finish")
    except TimeoutError:
        with store.engine.connect() as conn:
            print(conn.exec_driver_sql("SELECT next_seq, count(*) FROM conversations GROUP BY 1").all())
            print(conn.exec_driver_sql("SELECT kind, status, attempts, count(*) FROM steps GROUP BY 1,2,3").all())
        raise
    retried, first_attempts = 0, Counter()
    for cid in ids:
        events = store.log.list_events(cid)
        assert [e.type for e in events] == [
            "user_msg", "assistant_msg", "tool_call", "tool_result", "assistant_msg"
        ]
        assert store.conversations.load(cid).fsm.state == "idle"
        first_round = next(s for s in store.steps.list_of(cid) if s.kind == "llm"
                           and s.round_id == events[1].round_id)
        retried += first_round.attempts == 2
        first_attempts[first_round.attempts] += 1
        tool_steps = [s for s in store.steps.list_of(cid) if s.kind == "tool"]
        # one tool step; a second attempt only for a call the kill interrupted (same call id)
        assert len(tool_steps) == 1 and tool_steps[0].attempts <= 2
    # the killed calls were taken over, each once: none again from a worker still running it
    assert retried >= IN_FLIGHT * 0.8 and max(first_attempts) <= 2, dict(first_attempts)


def test_a_green_worker_refuses_to_start_when_psycopg_would_block_the_hub(workers):
    worker = workers("blocking", concurrency=10, pool="gevent", PSYCOPG_WAIT_FUNC="wait_c")
    wait_for(lambda: not worker.alive(), timeout_s=60, what="the worker to refuse to start")
    assert "would block the gevent hub" in worker.log_text()
