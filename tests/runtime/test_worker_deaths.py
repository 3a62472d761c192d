"""A green worker killed again and again with hundreds of healthy steps in flight: a crash
that takes many steps down is no reason to give any of them up (inv. 11), and the step that
does kill its worker is still found among them and given up.
"""
from __future__ import annotations

import time

import pytest

from agentq.core.scope import Scope
from agentq.worker.tasks import enqueue
from tests.support.processes import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

SCOPE = Scope(tenant="t1", user="u1")
GREEN = {"pool": "gevent", "concurrency": 1000}
# a healthy model step: half a second of streaming, long enough to be caught by a kill
HEALTHY = [{"text": "one two", "chunks": 2, "delay_s": 0.5}]
MAX_ATTEMPTS = {"AGENTQ_MAX_ATTEMPTS": "3"}


def begin(commands, broker, script) -> str:
    cid = commands.create_conversation(SCOPE, {"script": script}).id
    enqueue(broker, commands.post_message(cid, "go", SCOPE)[1])
    return cid


def running_under(store, worker) -> int:
    """How many steps the worker process runs now (its pid is in each claim's worker id)."""
    with store.engine.connect() as conn:
        return conn.exec_driver_sql(
            "SELECT count(*) FROM steps WHERE status = 'running' AND worker LIKE %s",
            (f"%:{worker.pid}:%",)).scalar()


def settled(store, ids) -> bool:
    """Every conversation ended its turn: answered, or failed."""
    with store.engine.connect() as conn:
        return conn.exec_driver_sql(
            "SELECT count(*) FROM conversations WHERE id = ANY(%s)"
            " AND fsm_state->>'state' IN ('idle', 'failed')", (ids,)).scalar() == len(ids)


def census(store) -> list:
    with store.engine.connect() as conn:
        return conn.exec_driver_sql(
            "SELECT kind, status, attempts, count(*) FROM steps GROUP BY 1, 2, 3").all()


def given_up(store, ids) -> list[str]:
    return [cid for cid in ids
            if any(e.type == "error" and e.content.get("code") == "max_attempts"
                   for e in store.log.list_events(cid))]


def kill_repeatedly(store, workers, ids, kills: int, *, busy: int, **env: str) -> int:
    """Kill a green worker once it runs `busy` steps (or 2.5 s after it started running
    any), `kills` times over; its replacement is started before each kill, so the next kill
    comes as soon as steps are claimed again. How many kills there were: fewer once every
    turn of `ids` has ended (a fast machine runs out of steps to kill)."""
    worker = workers("doomed0", **GREEN, **env)
    for n in range(kills):
        wait_for(lambda: running_under(store, worker) > 0 or settled(store, ids), timeout_s=60,
                 what=lambda: f"worker {n} to claim steps: {census(store)}; log:\n"
                              f"{worker.log_text()}")
        if settled(store, ids):
            worker.kill()
            return n
        replacement = workers(f"doomed{n + 1}", **GREEN, **env) if n + 1 < kills else None
        started = time.monotonic()
        while running_under(store, worker) < busy and time.monotonic() - started < 2.5:
            time.sleep(0.1)
        worker.kill()
        worker = replacement
    return kills


def test_a_green_worker_killed_every_few_seconds_gives_up_none_of_its_healthy_steps(
    pg_store_clean, commands, broker, workers, beat
):
    store = pg_store_clean
    # as the README deploys it: beat's sweep takes up the tasks a killed worker held unclaimed
    # (those it turned away while a step ran alone die with it)
    beat(**MAX_ATTEMPTS)
    ids = [begin(commands, broker, HEALTHY) for _ in range(80)]
    started = time.monotonic()
    kills = kill_repeatedly(store, workers, ids, 6, busy=40, **MAX_ATTEMPTS)
    print(f"killed {kills} times in {time.monotonic() - started:.0f} s: {census(store)}")
    survivor = workers("survivor", **GREEN, **MAX_ATTEMPTS)
    workers("survivor2", **GREEN, **MAX_ATTEMPTS)
    wait_for(lambda: settled(store, ids), timeout_s=120,
             what=f"every turn to end: {census(store)}; log:\n{survivor.log_text()[-3000:]}")
    print(f"settled {time.monotonic() - started:.0f} s after the first kill: {census(store)}")
    assert given_up(store, ids) == []
    assert all(store.log.list_events(cid)[-1].content.get("text") == HEALTHY[0]["text"] for cid in ids)


POISON = [{"tool_calls": [{"name": "segfault", "args": {}}]}, {"text": "the tool broke"}]
QUICK = [{"text": "fine", "delay_s": 0.3}]


def test_a_tool_that_crashes_its_green_worker_among_hundreds_of_healthy_steps_alone_fails(
    pg_store_clean, commands, broker, workers
):
    store = pg_store_clean
    env = {"AGENTQ_MAX_ATTEMPTS": "2"}
    poison = begin(commands, broker, POISON)
    ids = [begin(commands, broker, QUICK) for _ in range(200)]
    worker, deaths = workers("green0", **GREEN, **env), 0
    deadline = time.monotonic() + 150
    while not settled(store, [poison, *ids]):
        assert time.monotonic() < deadline, f"still unsettled: {census(store)}"
        if not worker.alive():
            deaths += 1
            worker = workers(f"green{deaths}", **GREEN, **env)
        time.sleep(0.2)
    assert given_up(store, ids) == []
    assert all(store.log.list_events(cid)[-1].content.get("text") == "fine" for cid in ids)
    # the poison step's own deaths, alone, gave it up: its call ended with an error result
    result = next(e for e in store.log.list_events(poison) if e.type == "tool_result")
    assert result.content["status"] == "error" and "giving up" in result.content["output"]
    assert store.log.list_events(poison)[-1].content.get("text") == "the tool broke"
    [tool] = [s for s in store.steps.list_of(poison) if s.kind == "tool"]
    assert (tool.status, tool.faults, tool.deaths) == ("failed_permanent", 2, 2)
    assert deaths == 4  # twice with company, then twice alone
