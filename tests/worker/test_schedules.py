"""Schedules with real processes: two beats and three workers fire each slot of a 2 s
schedule exactly once while a beat and a worker are killed; the catch-up rules after the
ticker was down; an unattended approval that expires by its schedule's rule, in the run's
own conversation and in a sub-agent's child it started."""
from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from agentq.agents.catalog import Catalog
from agentq.commands import Commands
from agentq.commands.agents import AgentCommands
from agentq.commands.schedules import NewSchedule, ScheduleCommands
from agentq.core.agents import AgentDefinition
from agentq.core.schedules import CatchUp, slot_conversation_id
from agentq.core.scope import Scope
from agentq.core.settings import parse_settings
from agentq.core.subagents import child_conversation_id
from agentq.tenancy.policy import Policy, ScheduleLimits
from agentq.tools import Registry
from tests.support.brokers import ON_EACH_BROKER
from tests.support.processes import FAST_RECOVERY, ROOT, wait_for, worker_env

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

SCOPE = Scope("acme")
EVERY_S = 2.0
TICK = {"AGENTQ_SCHEDULE_TICK_S": "0.5"}
REFUND = [
    {"text": "Refunding.", "tool_calls": [
        {"name": "refund_order", "args": {"order": "A-17", "amount": 129.9}}]},
    {"text": "Done."},
]
DELEGATE = [
    {"text": "Asking refund.", "tool_calls": [{"name": "refund", "args": {"input": "A-17"}}]},
    {"text": "Reported."},
]


@pytest.fixture
def schedules(pg_store_clean) -> ScheduleCommands:
    """Schedules of tenant acme, allowed every second, with agents `ok`, `refund` and
    `delegate` (which asks `refund` as its sub-agent)."""
    registry = Registry.from_modules(["agentq.tools.demo", "tests.support.tools_for_tests"])
    policy = dataclasses.replace(Policy.default(), schedules=ScheduleLimits(min_interval_s=1.0))
    commands = Commands(pg_store_clean, registry, policy=policy,
                        catalog=Catalog(pg_store_clean, policy.offers_agent))
    agents = AgentCommands(commands)
    for name, script, more in (("ok", [{"text": "ok"}], {}), ("refund", REFUND, {}),
                               ("delegate", DELEGATE, {"agents": [{"name": "refund"}]})):
        agents.create_agent(SCOPE, AgentDefinition(name=name, settings=parse_settings(
            {"profile": "scripted", "script": script, **more})))
    return ScheduleCommands(commands)


@pytest.fixture
def beats(tmp_path, pg_url, broker_url, redis_url):
    """Start `celery beat` processes, each with its own schedule file; killed at the end."""
    procs: list[subprocess.Popen] = []

    def start(name: str, **env_extra: str) -> subprocess.Popen:
        env = worker_env(pg_url, broker_url, redis_url, **{**FAST_RECOVERY, **TICK, **env_extra})
        with open(tmp_path / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "agentq.worker:app", "beat", "-l", "WARNING",
                 "--schedule", str(Path(tmp_path) / f"{name}-schedule")],
                env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait(timeout=10)


def every(store, sid):
    return sorted(store.schedules.list_runs(sid, limit=10_000), key=lambda r: r.slot_at)


@ON_EACH_BROKER
def test_two_beats_and_three_workers_fire_each_slot_once_while_a_beat_and_a_worker_die(
        schedules, beats, workers):
    store = schedules.store
    started = [workers(name) for name in ("w1", "w2", "w3")]
    first, _ = beats("beat1"), beats("beat2")
    record = schedules.create(SCOPE, NewSchedule(name="pulse", message="ping", every_s=EVERY_S,
                                                 agent="ok"))
    wait_for(lambda: len(every(store, record.id)) >= 5, timeout_s=60, what="five runs")
    # kill a beat and a worker just before a slot falls due: the others carry on
    next_at = store.schedules.load(record.id).next_at
    while store.schedules.load(record.id).next_at == next_at:
        time.sleep(0.02)
    time.sleep(EVERY_S - 0.15)
    first.kill()
    started[0].kill()
    wait_for(lambda: len(every(store, record.id)) >= 12, timeout_s=60, what="twelve runs")
    schedules.pause(SCOPE, record.id)
    wait_for(lambda: all(r.status == "fired" for r in every(store, record.id)), timeout_s=30,
             what="every run carried out")
    runs = every(store, record.id)
    slots = [r.slot_at for r in runs]
    assert slots == [slots[0] + timedelta(seconds=EVERY_S * k) for k in range(len(slots))]
    conversations = store.conversations.list_page(tenant="acme", limit=1000)
    assert sorted(c.id for c in conversations) == sorted(
        slot_conversation_id(record.id, slot) for slot in slots)
    for run in runs:  # one message per slot's conversation, its turn answered
        events = store.log.list_events(run.conversation_id)
        assert [e.type for e in events].count("user_msg") == 1, run


def test_after_the_ticker_was_down_each_schedule_follows_its_catch_up_rule(schedules, beats, workers):
    store = schedules.store
    workers("w1", AGENTQ_SCHEDULE_GRACE_S="1")
    made = {mode: schedules.create(SCOPE, NewSchedule(
        name=mode, message="ping", every_s=EVERY_S, agent="ok",
        catch_up=CatchUp(mode, max_slots=3))) for mode in ("skip", "latest", "all")}
    time.sleep(5 * EVERY_S)  # nothing ticks: four slots or more are missed
    beats("beat1", AGENTQ_SCHEDULE_GRACE_S="1")
    wait_for(lambda: all(len(every(store, r.id)) >= 2 + (r.name != "skip") for r in made.values()),
             timeout_s=60, what="runs after the beat started")
    for record in made.values():
        schedules.pause(SCOPE, record.id)
    missed, first, came = {}, {}, {}
    for mode, record in made.items():
        runs = every(store, record.id)
        came[mode] = came_back = runs[0].created_at  # the first tick's `now`, on each run it wrote
        first[mode] = [r.slot_at for r in runs if r.created_at == came_back]
        missed[mode] = [s for s in first[mode] if s < came_back - timedelta(seconds=1)]
        assert len({r.slot_at for r in runs}) == len(runs)
    assert missed["skip"] == []
    # latest: one slot, the newest; missed, or on time when the tick came within the grace of
    # a slot (an on-time slot stands for the missed ones)
    assert len(first["latest"]) == 1
    assert first["latest"][0] > came["latest"] - timedelta(seconds=1 + EVERY_S)
    assert len(missed["all"]) == 3
    gaps = {b - a for a, b in zip(missed["all"], missed["all"][1:])}
    assert gaps == {timedelta(seconds=EVERY_S)}  # the newest three, one after the other


def _expired_approval(store, conversation_id: str, answer: str):
    """The conversation's gated call, once it expired by the 3 s rule and the turn went on."""
    call = wait_for(lambda: next(iter(store.calls.list_of(conversation_id)), None),
                    timeout_s=60, what="the waiting call")
    assert call.needs_approval and call.expires_at == call.created_at + timedelta(seconds=3)
    wait_for(lambda: answer in [e.content.get("text") for e in
                                store.log.list_events(conversation_id)],
             timeout_s=60, what="the turn to go on after the expiry")
    assert store.calls.load(conversation_id, call.id).status == "expired"
    results = [e.content for e in store.log.list_events(conversation_id)
               if e.type == "tool_result"]
    assert "refused by the system" in str(results) and "Nobody attends this run" in str(results)


def test_an_unattended_approval_expires_by_its_schedules_rule_and_the_run_goes_on(
        schedules, beats, workers):
    """The run's own approval, and one in the child its sub-agent call started."""
    store = schedules.store
    workers("w1")
    beats("beat1")
    runs = {}
    for agent in ("refund", "delegate"):
        record = schedules.create(SCOPE, NewSchedule(name=agent, message="refund A-17",
                                                     every_s=3600.0, agent=agent,
                                                     expire_after_s=3.0))
        store.schedules.set_paused(record.id, tenant="acme", paused=False,
                                   now=record.created_at,
                                   next_at=record.created_at)  # its first slot now, not in an hour
        runs[agent] = wait_for(
            lambda sid=record.id: next(iter(store.schedules.list_runs(sid, limit=1)), None),
            timeout_s=60, what="the run")
    _expired_approval(store, runs["refund"].conversation_id, "Done.")
    parent = runs["delegate"].conversation_id
    agent_call = wait_for(lambda: next(iter(store.calls.list_of(parent)), None),
                          timeout_s=60, what="the sub-agent's call")
    _expired_approval(store, child_conversation_id(parent, agent_call.id), "Done.")
    wait_for(lambda: "Reported." in [e.content.get("text") for e in store.log.list_events(parent)],
             timeout_s=60, what="the parent to finish with its child's answer")
    assert store.calls.load(parent, agent_call.id).result == {"status": "ok", "output": "Done."}
