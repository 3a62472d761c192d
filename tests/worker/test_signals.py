"""What a real worker process starts with its tasks and stops with itself (agentq.worker.signals):
its slot offer per queue, and, on the timers queue, its sweeper candidate."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy
from sqlalchemy.pool import NullPool

from agentq.store.sweeper_lock import SWEEPER_LOCK_KEY
from tests.support.processes import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

STEPS = "agentq.model,agentq.tools"


def slots(store) -> dict[str, int]:
    return store.slots.load_per_queue(now=datetime.now(UTC))


def sweeper_lock_free(pg_url: str) -> bool:
    """Whether no process holds the sweeper lock now (taken and given back at once if free)."""
    engine = sqlalchemy.create_engine(pg_url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            got = conn.execute(sqlalchemy.text("SELECT pg_try_advisory_lock(:key)"),
                               {"key": SWEEPER_LOCK_KEY}).scalar()
            if got:
                conn.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:key)"),
                             {"key": SWEEPER_LOCK_KEY})
            return bool(got)
    finally:
        engine.dispose()


def test_a_threads_worker_offers_its_concurrency_on_each_queue_until_it_stops(pg_store_clean, workers):
    worker = workers("w1", concurrency=3, queues=STEPS)
    wait_for(lambda: slots(pg_store_clean) == {"agentq.model": 3, "agentq.tools": 3},
             what="the worker's slots")
    worker.stop()
    assert slots(pg_store_clean) == {}


def test_each_prefork_child_offers_one_slot(pg_store_clean, workers):
    workers("w1", concurrency=2, queues="agentq.model", pool="prefork")
    wait_for(lambda: slots(pg_store_clean) == {"agentq.model": 2}, what="one slot per child")


def test_only_a_worker_of_the_timers_queue_runs_a_sweeper_and_gives_its_lock_up_when_it_stops(
    pg_store_clean, pg_url, workers
):
    workers("steps", concurrency=2, queues=STEPS)
    wait_for(lambda: slots(pg_store_clean).get("agentq.model") == 2, what="the steps worker")
    assert sweeper_lock_free(pg_url)
    timers = workers("timers", concurrency=2, queues="agentq.timers")
    wait_for(lambda: not sweeper_lock_free(pg_url), what="the timers worker's sweeper to lead")
    timers.stop()
    wait_for(lambda: sweeper_lock_free(pg_url), what="the sweeper lock given up")
