"""Token budgets: past its budget a tenant's next model call does not go out and the turn
fails with budget_exceeded; other tenants go on; the next period's budget is fresh."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from agentq.commands import Commands
from agentq.config import Config
from agentq.core.scope import Scope
from agentq.core.token_budgets import TokenBudgets
from agentq.runtime import Runtime
from agentq.tenancy.access import provider_for
from agentq.tools import Registry
from tests.support.clock import Clock
from tests.support.drive import Recorder, drain

ACME = Scope(tenant="acme", user="u1")
OTHER = Scope(tenant="other", user="u2")
WEATHER = [
    {"text": "Checking.", "tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}]},
    {"text": "Cold in Oslo.", "chunks": 3},
]


class Counting:
    """The scripted provider, counting the calls that went out, per tenant's conversation."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, settings):
        inner, outer = provider_for(settings), self

        class Counted:
            def stream(self, request, ctx, cancel):
                outer.calls.append(ctx.conversation_id)
                return inner.stream(request, ctx, cancel)

        return Counted()


@pytest.fixture
def clock():
    return Clock(datetime(2026, 11, 21, 22, 0, tzinfo=timezone.utc))


@pytest.fixture
def providers():
    return Counting()


def runtime_with(store, clock, providers, budgets):
    registry = Registry.from_modules(["agentq.tools.demo", "tests.support.tools_for_tests"])
    return Runtime(store=store, registry=registry, pubsub=Recorder(), config=Config(lease_s=30.0),
                   clock=clock, providers=providers, sleep=lambda s: None,
                   budgets=lambda tenant: budgets.get(tenant, TokenBudgets()))


def turn(runtime, clock, scope, script=WEATHER, text="hello"):
    commands = Commands(runtime.store, runtime.registry, clock=clock)
    conv = commands.create_conversation(scope, {"script": script})
    _, follow = commands.post_message(conv.id, text, scope)
    drain(runtime, follow)
    return conv.id, commands


def failure(store, cid):
    errors = [e.content for e in store.list_events(cid) if e.type == "error"]
    return errors[-1] if errors else None


def test_past_its_budget_a_tenants_next_model_call_does_not_go_out_and_the_turn_fails(
        store, clock, providers):
    runtime = runtime_with(store, clock, providers, {"acme": TokenBudgets(tokens_per_day=1)})
    cid, _ = turn(runtime, clock, ACME)
    assert providers.calls == [cid]  # the first call went out (nothing spent), the second not
    assert store.load_conversation(cid).fsm.state == "failed"
    error = failure(store, cid)
    assert error["code"] == "budget_exceeded"
    assert "this day is spent" in error["message"] and "of 1 tokens" in error["message"]


def test_other_tenants_are_not_stopped_by_one_tenants_budget(store, clock, providers):
    runtime = runtime_with(store, clock, providers, {"acme": TokenBudgets(tokens_per_hour=1)})
    turn(runtime, clock, ACME)
    theirs, _ = turn(runtime, clock, OTHER)
    assert store.load_conversation(theirs).fsm.state == "idle"
    assert failure(store, theirs) is None


def test_the_next_period_has_a_fresh_budget_and_a_retry_finishes_the_turn(store, clock, providers):
    runtime = runtime_with(store, clock, providers, {"acme": TokenBudgets(tokens_per_hour=1)})
    cid, commands = turn(runtime, clock, ACME)
    assert failure(store, cid)["code"] == "budget_exceeded"
    drain(runtime, commands.retry(cid, ACME))  # the same hour: still spent, no call goes out
    assert len(providers.calls) == 1
    clock.tick(3600)
    drain(runtime, commands.retry(cid, ACME))
    assert len(providers.calls) == 2
    assert store.load_conversation(cid).fsm.state == "idle"


def test_a_budget_counts_every_conversation_of_the_tenant(store, clock, providers):
    one_call = WEATHER[1:]
    runtime = runtime_with(store, clock, providers, {})
    first, _ = turn(runtime, clock, ACME, one_call)
    spent = store.spent_since("acme", {"day": clock().replace(hour=0)})["day"]
    assert spent > 0
    runtime = runtime_with(store, clock, providers,
                           {"acme": TokenBudgets(tokens_per_month=spent + 1)})
    second, _ = turn(runtime, clock, ACME, one_call)  # spent < budget: it goes out
    third, _ = turn(runtime, clock, ACME, one_call)  # now past it: stopped before the call
    assert providers.calls == [first, second]
    assert store.load_conversation(second).fsm.state == "idle"
    assert failure(store, third)["code"] == "budget_exceeded"
