"""Turn rollups: a turn's calls add up in one row; its start is the earliest seen, its
duration the longest; turns rank by duration or cost within the range they started in."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agentq.core.usage import Tokens
from agentq.store.turn_usage import TurnRef, add_turn_txn
from agentq.store.usage import UsageKey

START = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
ONE = Tokens(input_tokens=100, output_tokens=10, calls=1)


def add(store, cid, turn_id, *, started_s, at_s, cost, tenant="acme"):
    key = UsageKey(tenant=tenant, agent=None, profile="p", model="m", conversation_id=cid)
    with store.engine.begin() as conn:
        add_turn_txn(conn, key, TurnRef(turn_id, START + timedelta(seconds=started_s)), ONE,
                     cost, at=START + timedelta(seconds=at_s))


def ranked(store, by, **kwargs):
    return store.turns.ranked(start=START, end=START + timedelta(hours=1), by=by, limit=10,
                              **kwargs)


def test_a_turns_calls_add_up_in_one_row_and_its_duration_is_to_its_latest_call(store):
    add(store, "c1", "t1", started_s=0, at_s=5, cost=7)
    add(store, "c1", "t1", started_s=0, at_s=3, cost=11)  # a late commit: not longer
    (row,) = ranked(store, "duration")
    assert (row.calls, row.input_tokens, row.cost_nanos, row.duration_ms) == (2, 200, 18, 5000)
    assert row.started_at == START and row.agent is None


def test_turns_rank_by_duration_or_by_cost_and_a_tenant_reads_only_its_own(store):
    add(store, "c1", "slow", started_s=0, at_s=60, cost=1)
    add(store, "c2", "dear", started_s=10, at_s=11, cost=500)
    add(store, "c3", "other", started_s=0, at_s=90, cost=900, tenant="globex")
    assert [r.turn_id for r in ranked(store, "duration")] == ["other", "slow", "dear"]
    assert [r.turn_id for r in ranked(store, "cost")] == ["other", "dear", "slow"]
    assert [r.turn_id for r in ranked(store, "cost", tenant="acme")] == ["dear", "slow"]


def test_a_turn_that_started_outside_the_range_is_not_ranked(store):
    add(store, "c1", "before", started_s=-1, at_s=10, cost=5)
    add(store, "c2", "after", started_s=3600, at_s=3700, cost=5)
    add(store, "c3", "inside", started_s=3599, at_s=3600, cost=5)
    assert [r.turn_id for r in ranked(store, "cost")] == ["inside"]
