"""Soft budget thresholds on a real store (SQLite and Postgres): past its share of a budget
a turn opens a pending `budget` call with what was spent and the limit, instead of calling
the model; approved, the turn goes on; rejected, it fails as a budget failure. The model
never reads the budget call."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from agentq.cli.check import check_conversation
from agentq.commands import Commands
from agentq.config import Config
from agentq.core.budget_asks import BUDGET_CALL, budget_call_id
from agentq.core.prices import Prices
from agentq.core.scope import Scope
from agentq.core.token_budgets import TokenBudgets
from agentq.runtime import Runtime
from agentq.tenancy.access import provider_for
from agentq.tools import Registry
from tests.support.clock import Clock
from tests.support.drive import Recorder, drain
from tests.support.rules import Rules

ACME = Scope(tenant="acme", user="u1")
PERSON = Scope(tenant="acme", user="alice")
PRICES = Prices(input=1_500, output=6_000, cached_input=1_500, reasoning=6_000)
WEATHER = [
    {"text": "Checking.", "tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}]},
    {"text": "Cold in Oslo."},
]
# 0.001 a day, asking past 1% (10,000 nanos): the first call (about 25,000) passes it
ASKING = TokenBudgets(cost_per_day=1_000_000, ask_at_percent=1)


class Seen:
    """The scripted provider, keeping every request the model was sent."""

    def __init__(self) -> None:
        self.requests: list = []

    def __call__(self, settings):
        inner, outer = provider_for(settings), self

        class Kept:
            def stream(self, request, ctx, cancel):
                outer.requests.append(request)
                return inner.stream(request, ctx, cancel)

        return Kept()


@pytest.fixture
def clock():
    return Clock(datetime(2026, 11, 21, 9, 0, tzinfo=UTC))


@pytest.fixture
def seen():
    return Seen()


@pytest.fixture
def runtime(store, clock, seen):
    registry = Registry.from_modules(["agentq.tools.demo", "tests.support.tools_for_tests"])
    rules = Rules(providers=seen, prices=lambda settings: PRICES, budgets=lambda t: ASKING)
    return Runtime(store=store, registry=registry, pubsub=Recorder(), config=Config(lease_s=30.0),
                   clock=clock, sleep=lambda s: None, rules=rules)


@pytest.fixture
def commands(runtime, clock):
    return Commands(runtime.store, runtime.registry, clock=clock)


def asked(store, runtime, commands):
    conv = commands.create_conversation(ACME, {"script": WEATHER})
    drain(runtime, commands.post_message(conv.id, "weather?", ACME)[1])
    return conv.id


def test_past_the_soft_threshold_the_turn_waits_on_a_budget_call_instead_of_the_model(
        store, runtime, commands, seen):
    cid = asked(store, runtime, commands)
    assert len(seen.requests) == 1  # the second call did not go out
    info = store.conversations.load(cid)
    turn_id = info.fsm.turn_id
    assert info.fsm.state == "awaiting_input" and list(info.fsm.pending) == [budget_call_id(turn_id)]
    (call,) = store.calls.list_of(cid, status="pending")
    assert (call.name, call.executor) == (BUDGET_CALL, "human")
    assert call.args["unit"] == "cost" and call.args["limit"] == "0.001000000"
    assert Decimal(call.args["spent"]) >= Decimal("0.00001") and call.args["ask_at_percent"] == 1
    assert "a person decides" in call.args["message"]
    made = [e for e in store.log.list_events(cid) if e.type == "tool_call"][-1]
    assert made.content["kind"] == BUDGET_CALL
    assert store.log.list_events(cid)[-1].type == "suspension"


def test_approved_the_turn_goes_on_and_the_model_never_reads_the_budget_call(
        store, runtime, commands, seen):
    cid = asked(store, runtime, commands)
    (call,) = store.calls.list_of(cid, status="pending")
    _, follow = commands.resolve(cid, call.id, PERSON, status="approved", result=None)
    drain(runtime, follow)
    assert store.conversations.load(cid).fsm.state == "idle"
    assert store.log.list_events(cid)[-1].content["text"] == "Cold in Oslo."
    sent = seen.requests[-1]
    assert len(seen.requests) == 2
    assert all(c.name != BUDGET_CALL for m in sent.messages for c in m.tool_calls)
    assert all(m.tool_call_id != call.id for m in sent.messages)
    assert check_conversation(store, cid) == []


def test_the_next_turn_asks_again_and_an_approval_holds_for_its_own_turn_only(
        store, runtime, commands, seen):
    cid = asked(store, runtime, commands)
    (call,) = store.calls.list_of(cid, status="pending")
    drain(runtime, commands.resolve(cid, call.id, PERSON, status="approved", result=None)[1])
    drain(runtime, commands.post_message(cid, "and tomorrow?", ACME)[1])
    info = store.conversations.load(cid)
    assert info.fsm.state == "awaiting_input"
    assert list(info.fsm.pending) == [budget_call_id(info.fsm.turn_id)] != [call.id]
    assert len(seen.requests) == 2


def test_rejected_the_turn_fails_as_a_budget_failure_without_another_call(
        store, runtime, commands, seen):
    cid = asked(store, runtime, commands)
    (call,) = store.calls.list_of(cid, status="pending")
    _, follow = commands.resolve(cid, call.id, PERSON, status="rejected", result=None,
                                 reason="too dear")
    drain(runtime, follow)
    assert store.conversations.load(cid).fsm.state == "failed"
    error = store.log.list_events(cid)[-1].content
    assert error["code"] == "budget_exceeded" and "declined" in error["message"]
    assert error["details"]["unit"] == "cost" and error["details"]["limit"] == "0.001000000"
    assert len(seen.requests) == 1


def test_under_the_soft_threshold_nothing_is_asked(store, clock, seen):
    registry = Registry.from_modules(["agentq.tools.demo", "tests.support.tools_for_tests"])
    roomy = TokenBudgets(cost_per_day=10**9, ask_at_percent=50)
    runtime = Runtime(store=store, registry=registry, pubsub=Recorder(), config=Config(),
                      clock=clock, sleep=lambda s: None,
                      rules=Rules(providers=seen, prices=lambda s: PRICES, budgets=lambda t: roomy))
    commands = Commands(store, registry, clock=clock)
    cid = asked(store, runtime, commands)
    assert store.conversations.load(cid).fsm.state == "idle" and len(seen.requests) == 2
    assert store.calls.list_of(cid, status="pending") == []


def test_in_a_run_nobody_attends_the_budget_call_expires_by_its_rule_and_the_turn_fails_saying_so(
        store, runtime, commands, seen, clock):
    conv = commands.create_conversation(ACME, {"script": WEATHER})
    _, follow = commands.post_message(conv.id, "weather?", ACME,
                                      unattended={"expire_after_s": 60, "schedule_id": "s1"})
    later = drain(runtime, follow)
    (call,) = store.calls.list_of(conv.id, status="pending")
    assert call.name == BUDGET_CALL and call.expires_at == call.created_at + timedelta(seconds=60)
    clock.tick(61)
    drain(runtime, later)
    assert store.calls.load(conv.id, call.id).status == "expired"
    assert store.conversations.load(conv.id).fsm.state == "failed"
    error = store.log.list_events(conv.id)[-1].content
    assert error["code"] == "budget_exceeded" and "nobody attends" in error["message"]
    assert len(seen.requests) == 1
