"""What model calls cost, on a real store (SQLite and Postgres): each call's tokens at the
prices in force, in its assistant_msg, the rollups (a sub-agent's in its root's tree) and
the budgets' totals, counted once however often a step runs; a money budget stops the next
call as a token budget does."""
from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from agentq.commands import Commands
from agentq.config import Config
from agentq.core.agents import AgentDefinition
from agentq.core.fsm import fold
from agentq.core.prices import Prices, format_money
from agentq.core.scope import Scope
from agentq.core.settings import Settings
from agentq.core.token_budgets import EPOCH, WHOLE, Meter, TokenBudgets
from agentq.core.usage import Tokens
from agentq.runtime import Runtime
from agentq.runtime.costs import turn_of
from agentq.tools import Registry
from tests.core.builders import assistant, log, user, view
from tests.support.clock import Clock
from tests.support.drive import Recorder, drain
from tests.support.rules import Rules

ACME = Scope(tenant="acme", user="u1")
PRICES = Prices(input=1_500, output=6_000, cached_input=750, reasoning=6_000)
CHILD = [{"text": "Oslo is rainy."}]
PARENT = [{"tool_calls": [{"name": "researcher", "args": {"input": "weather in Oslo?"}}]},
          {"text": "It rains."}]


@pytest.fixture
def clock():
    return Clock(datetime(2026, 11, 21, 22, 0, tzinfo=UTC))


def make_runtime(store, clock, budgets=None):
    registry = Registry.from_modules(["agentq.tools.demo", "tests.support.tools_for_tests"])
    rules = Rules(prices=lambda settings: PRICES,
                  budgets=(lambda tenant: budgets) if budgets is not None else None)
    return Runtime(store=store, registry=registry, pubsub=Recorder(), config=Config(lease_s=30.0),
                   clock=clock, sleep=lambda s: None, rules=rules)


def tree_turn(store, runtime, clock):
    """A parent's turn that asks a sub-agent: the parent's id and the child's."""
    store.agents.create("acme", AgentDefinition(name="researcher", settings=Settings(script=CHILD)),
                        now=clock())
    commands = Commands(store, runtime.registry, clock=clock)
    conv = commands.create_conversation(ACME, {"script": PARENT, "agents": [{"name": "researcher"}]})
    drain(runtime, commands.post_message(conv.id, "what is it like?", ACME)[1])
    (call,) = store.calls.list_of(conv.id)
    return conv.id, call.to_json()["child_conversation_id"]


def answers(store, cid):
    return [e.content for e in store.log.list_events(cid) if e.type == "assistant_msg"]


def priced(store, cid) -> int:
    """Its answers' tokens at PRICES: what the conversation's calls must have cost."""
    return sum(PRICES.cost_of(Tokens.of_call(a.get("usage"))) for a in answers(store, cid))


def rollup_costs(store, by):
    start = datetime(2026, 11, 21, tzinfo=UTC)
    rows = store.usage.report(tenant="acme", start=start, end=start + timedelta(days=2),
                              group_by="day", by=[by], limit=100)
    return {row.keys[by]: row.cost_nanos for row in rows}


def test_each_answer_records_its_calls_tokens_at_the_prices_in_force(store, clock):
    runtime = make_runtime(store, clock)
    parent, child = tree_turn(store, runtime, clock)
    for cid in (parent, child):
        for answer in answers(store, cid):
            assert answer["cost_nanos"] == PRICES.cost_of(Tokens.of_call(answer["usage"])) > 0


def test_a_sub_agents_cost_rolls_up_to_its_root_and_the_whole_is_tokens_times_prices(store, clock):
    runtime = make_runtime(store, clock)
    parent, child = tree_turn(store, runtime, clock)
    assert rollup_costs(store, "conversation") == {parent: priced(store, parent),
                                                   child: priced(store, child)}
    assert rollup_costs(store, "root_conversation") == {
        parent: priced(store, parent) + priced(store, child)}


def test_running_every_step_again_costs_nothing_more(store, clock):
    runtime = make_runtime(store, clock)
    parent, child = tree_turn(store, runtime, clock)
    before = rollup_costs(store, "conversation")
    for _ in range(2):
        for cid in (parent, child):
            drain(runtime, runtime.advance(cid))
            for call in store.calls.list_of(cid):
                drain(runtime, runtime.run_tool(cid, call.id))
    assert rollup_costs(store, "conversation") == before
    spent = store.usage.load_spent(parent)
    assert spent.cost_of(Meter("conversation", parent, WHOLE, EPOCH)) == priced(store, parent)


def test_unpriced_models_cost_nothing_and_their_answers_say_no_cost(store, clock):
    registry = Registry.from_modules(["agentq.tools.demo"])
    runtime = Runtime(store=store, registry=registry, pubsub=Recorder(), config=Config(),
                      clock=clock, sleep=lambda s: None, rules=Rules())
    commands = Commands(store, registry, clock=clock)
    conv = commands.create_conversation(ACME, {"script": CHILD})
    drain(runtime, commands.post_message(conv.id, "hi", ACME)[1])
    (answer,) = answers(store, conv.id)
    assert "cost_nanos" not in answer and answer["usage"]["input_tokens"] > 0
    assert rollup_costs(store, "conversation") == {conv.id: 0}


def test_past_its_money_budget_a_tenants_next_call_does_not_go_out(store, clock):
    runtime = make_runtime(store, clock, TokenBudgets(cost_per_day=1))  # one nano
    commands = Commands(store, runtime.registry, clock=clock)
    first = commands.create_conversation(ACME, {"script": CHILD})
    drain(runtime, commands.post_message(first.id, "hi", ACME)[1])
    second = commands.create_conversation(ACME, {"script": CHILD})
    drain(runtime, commands.post_message(second.id, "hi", ACME)[1])
    assert store.conversations.load(first.id).fsm.state == "idle"
    events = store.log.list_events(second.id)
    assert [e.type for e in events] == ["user_msg", "error"]
    error = events[-1].content
    assert error["code"] == "budget_exceeded" and "money budget" in error["message"]
    assert error["details"]["unit"] == "cost" and error["details"]["limit"] == "0.000000001"
    assert error["details"]["spent"] == format_money(priced(store, first.id))


def test_each_turn_has_one_row_with_its_calls_and_cost_however_often_its_steps_run(store, clock):
    runtime = make_runtime(store, clock)
    parent, child = tree_turn(store, runtime, clock)
    for cid in (parent, child):
        drain(runtime, runtime.advance(cid))
    start = datetime(2026, 11, 21, tzinfo=UTC)
    rows = store.turns.ranked(start=start, end=start + timedelta(days=1), by="cost", limit=10)
    turns = {row.conversation_id: row for row in rows}
    assert set(turns) == {parent, child}
    assert (turns[parent].calls, turns[child].calls) == (2, 1)
    assert turns[parent].cost_nanos == priced(store, parent)
    assert turns[child].cost_nanos == priced(store, child)
    assert turns[child].root_conversation_id == parent and turns[child].agent == "researcher"
    (user_msg,) = [e for e in store.log.list_events(parent) if e.type == "user_msg"]
    assert turns[parent].turn_id == user_msg.turn_id
    assert turns[parent].started_at == user_msg.created_at


def test_a_turn_starts_at_its_own_user_msg_found_from_the_views_end():
    events = log(user("one"), assistant("a"), user("two"), assistant("b"))
    seen = replace(view(events), fsm=fold(events))
    found = turn_of(seen, datetime(2030, 1, 1, tzinfo=UTC))
    assert found is not None and found.turn_id == "t3"
    assert found.started_at == events[2].created_at
    alone = replace(view(events[3:]), fsm=fold(events))  # a summary stands for its user_msg
    later = datetime(2030, 1, 1, tzinfo=UTC)
    assert turn_of(alone, later).started_at == events[3].created_at
