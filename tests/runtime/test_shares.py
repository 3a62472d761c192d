"""Fair by default, on the production shape: a gevent worker for the model and timers
queues, a threads worker of N slots for the tools queue, no policy file. One tenant's 2N
slow tool calls do not keep another tenant's one-call turn waiting behind them.
"""
from __future__ import annotations

import pytest

from agentq.core.scope import Scope
from agentq.worker.tasks import enqueue
from tests.support.processes import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

SLOTS = 4
SLOW_S = 6


def turn(commands, broker, scope: Scope, seconds: float, key: str) -> str:
    script = [{"tool_calls": [{"name": "slow_lookup", "args": {"key": key, "seconds": seconds}}]},
              {"text": "done"}]
    cid = commands.create_conversation(scope, {"script": script}).id
    enqueue(broker, commands.post_message(cid, "go", scope)[1])
    return cid


def tool_steps(store, ids) -> dict[str, list[str]]:
    by_status: dict[str, list[str]] = {}
    for cid in ids:
        for step in store.steps.list_of(cid):
            if step.kind == "tool":
                by_status.setdefault(step.status, []).append(cid)
    return by_status


def offered(store, queue: str) -> int:
    with store.engine.connect() as conn:
        return conn.exec_driver_sql(
            "SELECT coalesce(sum(slots), 0) FROM worker_slots WHERE queue = %s", (queue,)).scalar()


def test_with_no_policy_a_tenant_holding_twice_the_tool_slots_lets_another_tenants_tool_run_next(
    pg_store_clean, commands, broker, workers, tmp_path
):
    store = pg_store_clean
    tool_log = tmp_path / "tool-starts.txt"
    tool_log.touch()
    env = {"AGENTQ_TEST_TOOL_LOG": str(tool_log)}
    tools = workers("tools", concurrency=SLOTS, queues="agentq.tools", **env)
    wait_for(lambda: offered(store, "agentq.tools") == SLOTS, timeout_s=60,
             what=f"the tools worker to offer its slots; log:\n{tools.log_text()}")
    workers("model", concurrency=100, pool="gevent", queues="agentq.model,agentq.timers", **env)
    bulk, small = Scope("bulk", "u1"), Scope("small", "u2")
    slow = [turn(commands, broker, bulk, SLOW_S, f"a{n}") for n in range(2 * SLOTS)]
    # every bulk call sent to the tools queue, and its first wave started
    wait_for(lambda: len(tool_log.read_text().split()) >= SLOTS - 1
             and all(store.conversations.load(cid).fsm.rounds == 1 for cid in slow), timeout_s=60,
             what=f"the bulk tenant's first wave; tools log:\n{tools.log_text()}")
    quick = turn(commands, broker, small, 0.1, "b")
    wait_for(lambda: store.conversations.load(quick).fsm.state == "idle", timeout_s=60,
             what="the small tenant's turn")
    # it ended while the bulk tenant's first wave still ran: its tool took the free slot
    assert len(tool_steps(store, slow).get("succeeded", ())) == 0
    [quick_call] = [e.content["tool_call_id"] for e in store.log.list_events(quick)
                    if e.type == "tool_call"]
    wait_for(lambda: all(store.conversations.load(cid).fsm.state == "idle" for cid in slow),
             timeout_s=90, what="the bulk tenant's turns")
    started = tool_log.read_text().split()
    assert len(started) == 2 * SLOTS + 1 and started.index(quick_call) == SLOTS - 1
