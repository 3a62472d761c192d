"""Token budgets hold across worker processes: what one worker's calls spent stops the
tenant's next model call on another, or on two running at once, and other tenants go on."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentq.core.scope import Scope
from agentq.worker.tasks import enqueue
from tests.support.processes import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

ACME = Scope(tenant="acme", user="u1")
OTHER = Scope(tenant="other", user="u2")
ONE_CALL = [{"text": "Counted."}]


def start(commands, broker, scope):
    conv = commands.create_conversation(scope, {"script": ONE_CALL})
    _, follow = commands.post_message(conv.id, "hello", scope)
    enqueue(broker, follow)
    return conv.id


def settled(store, cid):
    state = store.conversations.load(cid).fsm.state
    return state if state in ("idle", "failed") else None


def test_what_one_worker_spent_stops_the_tenants_next_call_on_another(
    pg_store_clean, commands, broker, workers, tmp_path
):
    store = pg_store_clean
    policy = tmp_path / "policy.toml"
    policy.write_text("[tenants.acme.budgets]\ntokens_per_day = 1\n")
    first = workers("w1", AGENTQ_POLICY=str(policy))
    spent = start(commands, broker, ACME)
    assert wait_for(lambda: settled(store, spent), what="the first turn") == "idle"
    first.kill()
    workers("w2", AGENTQ_POLICY=str(policy))
    stopped, other = start(commands, broker, ACME), start(commands, broker, OTHER)
    assert wait_for(lambda: settled(store, stopped), what="the second turn") == "failed"
    assert wait_for(lambda: settled(store, other), what="the other tenant's turn") == "idle"
    (error,) = [e.content for e in store.log.list_events(stopped) if e.type == "error"]
    assert error["code"] == "budget_exceeded"
    assert [e.type for e in store.log.list_events(stopped)] == ["user_msg", "error"]


def test_with_two_workers_running_at_once_no_call_of_a_spent_tenant_goes_out(
    pg_store_clean, commands, broker, workers, tmp_path
):
    store = pg_store_clean
    policy = tmp_path / "policy.toml"
    policy.write_text("[tenants.acme.budgets]\ntokens_per_day = 1\n")
    for name in ("w1", "w2"):
        workers(name, concurrency=2, AGENTQ_POLICY=str(policy))
    spent = start(commands, broker, ACME)
    assert wait_for(lambda: settled(store, spent), what="the first turn") == "idle"
    stopped = [start(commands, broker, ACME) for _ in range(6)]
    others = [start(commands, broker, OTHER) for _ in range(3)]
    for cid in stopped:
        assert wait_for(lambda: settled(store, cid), what="an acme turn") == "failed"
        assert [e.type for e in store.log.list_events(cid)] == ["user_msg", "error"]
    for cid in others:
        assert wait_for(lambda: settled(store, cid), what="the other tenant's turn") == "idle"
    totals = store.usage.report(tenant=None, start=store.conversations.load(spent).created_at,
                                end=datetime.now(UTC) + timedelta(hours=1), group_by="day",
                                by=["tenant"], limit=10)
    assert {row.keys["tenant"]: row.tokens.calls for row in totals} == {"acme": 1, "other": 3}
