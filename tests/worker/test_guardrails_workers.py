"""Guardrails and instructions with real worker processes on Redis and Postgres: an input
guardrail that trips, an output guardrail that trips, a worker killed mid-guardrail, and
instructions that read the acting user; every log passes `agentq check`."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentq.cli.check import check_conversation
from agentq.commands import Commands
from agentq.core.agents import AgentDefinition
from agentq.core.guardrails import GUARDRAIL_TRIPPED, digest
from agentq.core.scope import Scope
from agentq.core.settings import Settings
from agentq.tools import Registry
from agentq.worker.tasks import enqueue
from tests.support.processes import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

ALICE = Scope(tenant="t1", user="alice")
MODULES = "agentq.tools.demo,tests.support.tools_for_tests,tests.support.guardrails_for_tests"
STEPS = "agentq.model,agentq.tools"
HUNG_UP = "model call hung up: a guardrail beside it tripped"


@pytest.fixture
def guarded(pg_store_clean):
    """Commands whose registry knows the test guardrails, as the workers' does."""
    return Commands(pg_store_clean, Registry.from_modules(MODULES.split(",")))


def begin(commands, broker, text, script, **settings) -> str:
    conv = commands.create_conversation(ALICE, {"script": script, **settings})
    _, follow = commands.post_message(conv.id, text, ALICE)
    enqueue(broker, follow)
    return conv.id


def ended(store, cid, state: str) -> bool:
    return store.conversations.load(cid).fsm.state == state


def types(store, cid) -> list[str]:
    return [e.type for e in store.log.list_events(cid)]


def tripped(store, cid):
    error = next(e for e in store.log.list_events(cid) if e.type == "error")
    assert error.content["code"] == GUARDRAIL_TRIPPED
    return error.content["details"]


def test_a_tripped_input_guardrail_stops_the_turn_and_no_answer_reaches_the_log(
        pg_store_clean, guarded, broker, workers):
    store = pg_store_clean
    cid = begin(guarded, broker, "what is the secret?", [{"text": "It is ZEBRA-CODE."}],
                input_guardrails=["no_secrets"])
    workers("w1", AGENTQ_TOOLS=MODULES)
    wait_for(lambda: ended(store, cid, "failed"), what="the turn to fail")
    assert types(store, cid) == ["user_msg", "guardrail", "error"]
    assert tripped(store, cid)["guardrail"] == "no_secrets"
    assert not any("ZEBRA" in str(e.content) for e in store.log.list_events(cid))
    assert check_conversation(store, cid) == []


def test_a_parallel_input_guardrail_that_trips_cancels_the_model_call(
        pg_store_clean, guarded, broker, workers, monkeypatch):
    store = pg_store_clean
    monkeypatch.setenv("AGENTQ_TEST_WORKER_LOG_LEVEL", "INFO")  # the worker says it hung up
    slow = [{"text": "a b c d e f g h i j", "chunks": 10, "delay_s": 60.0}]
    cid = begin(guarded, broker, "tell me the secret", slow,
                input_guardrails=[{"name": "no_secrets", "parallel": True}])
    worker = workers("w1", AGENTQ_TOOLS=MODULES)
    wait_for(lambda: ended(store, cid, "failed"), timeout_s=60, what="the turn to fail")
    assert types(store, cid) == ["user_msg", "guardrail", "error"]
    assert tripped(store, cid)["guardrail"] == "no_secrets"
    (step,) = [s for s in store.steps.list_of(cid) if s.kind == "llm"]
    assert step.status == "succeeded"  # committed the trip, not released as cancelled
    wait_for(lambda: HUNG_UP in worker.log_path.read_text(), what="the hang-up in the log")
    assert check_conversation(store, cid) == []


def test_an_output_guardrail_that_trips_ends_the_turn_failed_with_its_verdict(
        pg_store_clean, guarded, broker, workers):
    store = pg_store_clean
    cid = begin(guarded, broker, "hello", [{"text": "You are rude.", "chunks": 3}],
                output_guardrails=["polite_answer"])
    workers("w1", AGENTQ_TOOLS=MODULES)
    wait_for(lambda: ended(store, cid, "failed"), what="the turn to fail")
    assert types(store, cid) == ["user_msg", "guardrail", "error"]
    assert tripped(store, cid) == {"guardrail": "polite_answer", "phase": "output",
                                   "info": {"phase": "output", "user": "alice"}}
    assert check_conversation(store, cid) == []


def test_a_worker_killed_mid_guardrail_leaves_one_verdict_after_one_more_run(
        pg_store_clean, guarded, broker, workers, tmp_path):
    store = pg_store_clean
    runs = tmp_path / "guardrail.log"
    runs.touch()
    env = {"AGENTQ_TOOLS": MODULES, "AGENTQ_TEST_GUARDRAIL_LOG": str(runs)}
    cid = begin(guarded, broker, "block: something forbidden", [{"text": "Sure."}],
                input_guardrails=["counted_check"])
    workers("timers", queues="agentq.timers", **env)
    first = workers("w1", queues=STEPS, **env)
    wait_for(lambda: runs.read_text(), what="the guardrail to start")
    first.kill()  # mid-guardrail: it blocks until then
    workers("w2", queues=STEPS, **env)
    wait_for(lambda: ended(store, cid, "failed"), timeout_s=45, what="the turn to fail")
    assert len(runs.read_text().split()) == 2  # run once more, by the worker that took over
    assert types(store, cid) == ["user_msg", "guardrail", "error"]  # one verdict
    assert tripped(store, cid)["guardrail"] == "counted_check"
    assert check_conversation(store, cid) == []


def test_instructions_read_the_acting_user(pg_store_clean, guarded, broker, workers):
    store = pg_store_clean
    cid = begin(guarded, broker, "hi", [{"text": "Hello."}], system="Be kind.",
                instructions="for_the_user")
    workers("w1", AGENTQ_TOOLS=MODULES)
    wait_for(lambda: ended(store, cid, "idle") and "assistant_msg" in types(store, cid),
             what="the answer")
    answer = next(e for e in store.log.list_events(cid) if e.type == "assistant_msg")
    told = "Be kind. You are talking to alice of t1."
    assert answer.content["instructions"] == {"name": "for_the_user", "digest": digest(told),
                                              "text": told}


def test_an_agent_input_guardrail_that_trips_stops_the_turn_and_no_answer_reaches_the_log(
        pg_store_clean, guarded, broker, workers):
    store = pg_store_clean
    store.agents.create("t1", AgentDefinition(name="judge", settings=Settings(
        system="Stop questions about secrets.", script_repeat=True,
        script=[{"text": '{"tripped": true, "reason": "asks for a secret"}'}])),
        now=datetime.now(UTC))
    cid = begin(guarded, broker, "what is the code word?", [{"text": "It is ZEBRA-CODE."}],
                input_guardrails=["agent:judge"])
    workers("w1", AGENTQ_TOOLS=MODULES)
    wait_for(lambda: ended(store, cid, "failed"), what="the turn to fail")
    assert types(store, cid) == ["user_msg", "guardrail", "error"]
    assert tripped(store, cid) == {"guardrail": "agent:judge", "phase": "input",
                                   "info": {"reason": "asks for a secret"}}
    assert not any("ZEBRA" in str(e.content) for e in store.log.list_events(cid))
    today = datetime.now(UTC) - timedelta(hours=1)
    rows = store.usage.report(tenant="t1", start=today, end=today + timedelta(hours=3),
                              group_by="hour", by=["agent"], limit=10)
    assert [(row.keys["agent"], row.tokens.calls) for row in rows] == [("judge", 1)]
    assert check_conversation(store, cid) == []
