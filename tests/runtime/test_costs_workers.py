"""Costs and money budgets with real worker processes on Redis and Postgres: a turn that
asks a sub-agent, whose worker is killed mid-call, costs its tokens at the policy's prices
once; what one worker's calls cost stops the tenant's next call on another; a soft
threshold asks a person on one worker and their answer is carried out on another."""
from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from agentq.core.agents import AgentDefinition
from agentq.core.prices import Prices, format_money
from agentq.core.scope import Scope
from agentq.core.settings import Settings
from agentq.core.subagents import child_conversation_id
from agentq.core.token_budgets import EPOCH, WHOLE, Meter
from agentq.core.usage import Tokens
from agentq.process.clock import utcnow
from agentq.worker.tasks import enqueue
from tests.support.processes import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

ACME = Scope(tenant="acme", user="u1")
OTHER = Scope(tenant="other", user="u2")
PRICES_TOML = "[prices.scripted]\ninput = 1.5\noutput = 6\ncached_input = 0.75\n"
PRICES = Prices(input=1_500, output=6_000, cached_input=750, reasoning=6_000)


def policy(tmp_path, text=""):
    path = tmp_path / "policy.toml"
    path.write_text(PRICES_TOML + text)
    return str(path)


def answers(store, cid):
    return [e.content for e in store.log.list_events(cid) if e.type == "assistant_msg"]


def priced(store, cid) -> int:
    return sum(PRICES.cost_of(Tokens.of_call(a["usage"])) for a in answers(store, cid))


def settled(store, cid):
    state = store.conversations.load(cid).fsm.state
    return state if state in ("idle", "failed") else None


def report(store, since, by):
    return store.usage.report(tenant=None, start=since, end=datetime.now(UTC) + timedelta(hours=1),
                              group_by="day", by=[by], limit=100)


def test_a_turn_with_a_sub_agent_and_a_worker_killed_mid_call_costs_its_tokens_at_the_prices_once(
    pg_store_clean, commands, broker, workers, beat, tmp_path
):
    store = pg_store_clean
    since = utcnow()
    store.agents.create("acme", AgentDefinition(name="researcher", settings=Settings(
        script=[{"text": "a slow answer", "chunks": 10, "delay_s": 3.0}])), now=since)
    conv = commands.create_conversation(ACME, {
        "script": [{"tool_calls": [{"name": "researcher", "args": {"input": "dig"}}]},
                   {"text": "Dug."}], "agents": ["researcher"]})
    enqueue(broker, commands.post_message(conv.id, "go", ACME)[1])
    first = workers("w1", AGENTQ_POLICY=policy(tmp_path))
    (call_id,) = wait_for(lambda: store.conversations.load(conv.id).fsm.pending,
                          what="the sub-agent call")
    child = child_conversation_id(conv.id, call_id)
    running = wait_for(lambda: next((s for s in store.steps.list_of(child)
                                     if s.kind == "llm" and s.status == "running"), None),
                       what="the child's model step")
    first.kill()  # mid-stream: its call did not commit
    time.sleep(2.5)  # past the lease
    workers("w2", AGENTQ_POLICY=policy(tmp_path))
    beat()
    wait_for(lambda: settled(store, conv.id) == "idle"
             and store.conversations.load(conv.id).fsm.rounds >= 2, what="the parent's answer")
    assert store.steps.load(running.step_key).attempts == 2  # the child's call ran twice
    assert [len(answers(store, cid)) for cid in (conv.id, child)] == [2, 1]
    for cid in (conv.id, child):
        for answer in answers(store, cid):
            assert answer["cost_nanos"] == PRICES.cost_of(Tokens.of_call(answer["usage"])) > 0
    (tree,) = report(store, since, "root_conversation")
    assert tree.keys["root_conversation"] == conv.id and tree.tokens.calls == 3
    assert tree.cost_nanos == priced(store, conv.id) + priced(store, child)
    turns = store.turns.ranked(start=since, end=utcnow() + timedelta(minutes=1), by="cost",
                               limit=10)
    assert {(t.conversation_id, t.calls, t.cost_nanos) for t in turns} == {
        (conv.id, 2, priced(store, conv.id)), (child, 1, priced(store, child))}


def test_what_one_worker_spent_in_money_stops_the_tenants_next_call_on_another(
    pg_store_clean, commands, broker, workers, tmp_path
):
    store = pg_store_clean
    money = policy(tmp_path, "[tenants.acme.budgets]\ncost_per_day = '0.000001'\n")
    first = workers("w1", AGENTQ_POLICY=money)

    def start(scope):
        conv = commands.create_conversation(scope, {"script": [{"text": "Counted."}]})
        enqueue(broker, commands.post_message(conv.id, "hello", scope)[1])
        return conv.id

    spent = start(ACME)
    assert wait_for(lambda: settled(store, spent), what="the first turn") == "idle"
    assert priced(store, spent) >= 1_000  # a micro-unit or more: past the budget
    first.kill()
    workers("w2", AGENTQ_POLICY=money)
    stopped, other = start(ACME), start(OTHER)
    assert wait_for(lambda: settled(store, stopped), what="the second turn") == "failed"
    assert wait_for(lambda: settled(store, other), what="the other tenant's turn") == "idle"
    events = store.log.list_events(stopped)
    assert [e.type for e in events] == ["user_msg", "error"]
    error = events[-1].content
    assert error["code"] == "budget_exceeded" and error["details"]["unit"] == "cost"
    assert error["details"]["limit"] == "0.000001000"


def test_a_soft_threshold_asks_a_person_on_one_worker_and_the_approved_turn_goes_on_on_another(
    pg_store_clean, commands, broker, workers, tmp_path
):
    store = pg_store_clean
    asking = policy(tmp_path, "[tenants.acme.budgets]\ncost_per_day = '0.001'\nask_at_percent = 1\n")
    first = workers("w1", AGENTQ_POLICY=asking)
    conv = commands.create_conversation(ACME, {"script": [
        {"text": "Checking.", "tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}]},
        {"text": "Cold in Oslo."}]})
    enqueue(broker, commands.post_message(conv.id, "weather?", ACME)[1])
    (call,) = wait_for(lambda: store.calls.list_of(conv.id, status="pending"),
                       what="the budget call")
    assert call.name == "budget" and call.args["unit"] == "cost"
    assert call.args["limit"] == "0.001000000"
    assert call.args["spent"] == format_money(priced(store, conv.id))  # the first call's cost
    assert len(answers(store, conv.id)) == 1  # the second call waits for the person
    first.kill()
    workers("w2", AGENTQ_POLICY=asking)
    enqueue(broker, commands.resolve(conv.id, call.id, Scope(tenant="acme", user="alice"),
                                     status="approved", result=None)[1])
    assert wait_for(lambda: settled(store, conv.id), what="the approved turn") == "idle"
    assert answers(store, conv.id)[-1]["text"] == "Cold in Oslo."
    whole = Meter("conversation", conv.id, WHOLE, EPOCH)  # both calls, on both workers
    assert store.usage.load_spent(conv.id).cost_of(whole) == priced(store, conv.id)


def test_a_rejected_budget_call_fails_the_turn_as_a_budget_failure_on_another_worker(
    pg_store_clean, commands, broker, workers, tmp_path
):
    store = pg_store_clean
    asking = policy(tmp_path, "[budgets]\ncost_per_conversation = '0.001'\nask_at_percent = 1\n")
    workers("w1", AGENTQ_POLICY=asking)
    workers("w2", AGENTQ_POLICY=asking)
    conv = commands.create_conversation(ACME, {"script": [
        {"text": "Checking.", "tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}]},
        {"text": "Cold in Oslo."}]})
    enqueue(broker, commands.post_message(conv.id, "weather?", ACME)[1])
    (call,) = wait_for(lambda: store.calls.list_of(conv.id, status="pending"),
                       what="the budget call")
    assert call.args["scope"] == "conversation" and call.args["period"] == "life"
    enqueue(broker, commands.resolve(conv.id, call.id, Scope(tenant="acme", user="alice"),
                                     status="rejected", result=None, reason="too dear")[1])
    assert wait_for(lambda: settled(store, conv.id), what="the rejected turn") == "failed"
    error = store.log.list_events(conv.id)[-1].content
    assert error["code"] == "budget_exceeded" and error["details"]["scope"] == "conversation"
    assert len(answers(store, conv.id)) == 1
