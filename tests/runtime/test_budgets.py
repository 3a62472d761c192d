"""Token budgets: past its budget a tenant's (an agent's, a conversation's) next model call
does not go out and the turn fails with budget_exceeded, or waits, holding no worker, for
the period to reset; other tenants go on; the next period's budget is fresh."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentq.commands import Commands
from agentq.commands.agents import AgentCommands
from agentq.config import Config
from agentq.core.agents import AgentDefinition
from agentq.core.keys import MODEL_STEP
from agentq.core.scope import Scope
from agentq.core.settings import parse_settings
from agentq.core.timefmt import format_ts
from agentq.core.token_budgets import Meter, PeriodBudgets, TokenBudgets, period_start
from agentq.runtime import Runtime
from agentq.store.webhooks import WebhookEndpoint
from agentq.tenancy.access import provider_for
from agentq.tools import Registry
from agentq.webhooks.payloads import payload
from tests.support.clock import Clock
from tests.support.drive import Recorder, drain
from tests.support.rules import Rules

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
    return Clock(datetime(2026, 11, 21, 22, 0, tzinfo=UTC))


@pytest.fixture
def providers():
    return Counting()


def runtime_with(store, clock, providers, budgets):
    registry = Registry.from_modules(["agentq.tools.demo", "tests.support.tools_for_tests"])
    return Runtime(store=store, registry=registry, pubsub=Recorder(), config=Config(lease_s=30.0),
                   clock=clock, sleep=lambda s: None,
                   rules=Rules(providers=providers,
                               budgets=lambda tenant: budgets.get(tenant, TokenBudgets())))


def turn(runtime, clock, scope, script=WEATHER, text="hello"):
    commands = Commands(runtime.store, runtime.registry, clock=clock)
    conv = commands.create_conversation(scope, {"script": script})
    _, follow = commands.post_message(conv.id, text, scope)
    drain(runtime, follow)
    return conv.id, commands


def failure(store, cid):
    errors = [e.content for e in store.log.list_events(cid) if e.type == "error"]
    return errors[-1] if errors else None


def test_past_its_budget_a_tenants_next_model_call_does_not_go_out_and_the_turn_fails(
        store, clock, providers):
    runtime = runtime_with(store, clock, providers, {"acme": TokenBudgets(tokens_per_day=1)})
    cid, _ = turn(runtime, clock, ACME)
    assert providers.calls == [cid]  # the first call went out (nothing spent), the second not
    assert store.conversations.load(cid).fsm.state == "failed"
    error = failure(store, cid)
    assert error["code"] == "budget_exceeded"
    assert "this day is spent" in error["message"] and "of 1 tokens" in error["message"]


def test_other_tenants_are_not_stopped_by_one_tenants_budget(store, clock, providers):
    runtime = runtime_with(store, clock, providers, {"acme": TokenBudgets(tokens_per_hour=1)})
    turn(runtime, clock, ACME)
    theirs, _ = turn(runtime, clock, OTHER)
    assert store.conversations.load(theirs).fsm.state == "idle"
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
    assert store.conversations.load(cid).fsm.state == "idle"


def test_a_budget_counts_every_conversation_of_the_tenant(store, clock, providers):
    one_call = WEATHER[1:]
    runtime = runtime_with(store, clock, providers, {})
    first, _ = turn(runtime, clock, ACME, one_call)
    day = Meter("tenant", "", "day", period_start("day", clock()))
    spent = store.usage.load_spent(first).of(day)
    assert spent > 0
    runtime = runtime_with(store, clock, providers,
                           {"acme": TokenBudgets(tokens_per_month=spent + 1)})
    second, _ = turn(runtime, clock, ACME, one_call)  # spent < budget: it goes out
    third, _ = turn(runtime, clock, ACME, one_call)  # now past it: stopped before the call
    assert providers.calls == [first, second]
    assert store.conversations.load(second).fsm.state == "idle"
    assert failure(store, third)["code"] == "budget_exceeded"


def test_an_agents_budget_stops_that_agents_conversations_only(store, clock, providers):
    runtime = runtime_with(store, clock, providers, {"acme": TokenBudgets(
        agents={"support": PeriodBudgets(tokens_per_day=1)})})
    commands = Commands(store, runtime.registry, clock=clock)
    AgentCommands(commands).create_agent(ACME, AgentDefinition(
        name="support", settings=parse_settings({"script": WEATHER[1:]})))
    ones = []
    for _ in range(2):
        conv = commands.create_conversation(ACME, {}, agent="support")
        drain(runtime, commands.post_message(conv.id, "hello", ACME)[1])
        ones.append(conv.id)
    plain, _ = turn(runtime, clock, ACME, WEATHER[1:])
    assert providers.calls == [ones[0], plain]
    error = failure(store, ones[1])
    assert error["code"] == "budget_exceeded" and "of agent 'support' this day" in error["message"]
    assert error["details"]["scope"] == "agent" and error["details"]["agent"] == "support"


def test_a_conversations_budget_stops_it_for_good_and_no_other(store, clock, providers):
    runtime = runtime_with(store, clock, providers, {"acme": TokenBudgets(
        tokens_per_conversation=1, on_exceeded="wait")})
    cid, commands = turn(runtime, clock, ACME)
    assert providers.calls == [cid]
    error = failure(store, cid)  # it never resets: even with "wait" the turn fails
    assert error["details"]["scope"] == "conversation" and error["details"]["resets_at"] is None
    assert "does not reset" in error["message"]
    other, _ = turn(runtime, clock, ACME, WEATHER[1:])
    assert providers.calls == [cid, other]


def test_with_wait_a_turn_past_its_budget_is_held_until_the_period_resets_then_goes_on(
        store, clock, providers):
    runtime = runtime_with(store, clock, providers, {"acme": TokenBudgets(
        tokens_per_hour=1, on_exceeded="wait")})
    commands = Commands(runtime.store, runtime.registry, clock=clock)
    conv = commands.create_conversation(ACME, {"script": WEATHER})
    later = drain(runtime, commands.post_message(conv.id, "hello", ACME)[1])
    assert providers.calls == [conv.id]
    assert failure(store, conv.id) is None and store.conversations.load(conv.id).fsm.state != "failed"
    reset = datetime(2026, 11, 21, 23, 0, tzinfo=UTC)
    (advance,) = later  # a re-drive later (at the reset, or the ETA horizon if sooner)
    assert advance.eta is not None and clock() < advance.eta <= reset
    held = [s for s in store.steps.list_of(conv.id) if s.kind == MODEL_STEP and s.status == "scheduled"]
    assert len(held) == 1 and held[0].lease_until >= reset
    retry = [data for kind, data in runtime.pubsub.notices if kind == "retry"][-1]
    assert retry["budget"]["period"] == "hour" and retry["budget"]["on_exceeded"] == "wait"
    assert retry["budget"]["resets_at"] == format_ts(reset) and "resets at" in retry["error"]
    clock.tick(3600)
    assert drain(runtime, later) == []
    assert providers.calls == [conv.id, conv.id]
    assert store.conversations.load(conv.id).fsm.state == "idle"


def endpoint(store, tenant):
    now = datetime(2026, 11, 21, tzinfo=UTC)
    found = WebhookEndpoint(
        id=f"we_{tenant}", tenant=tenant, url="https://hooks.example.com/x",
        event_types=["turn.failed", "budget.exceeded"], sealed_secret="sealed",
        previous_sealed=None, previous_until=None, enabled=True, disabled_reason=None,
        failing_since=None, created_at=now, updated_at=now)
    assert store.webhooks.add_endpoint(found, max_per_tenant=10)
    return found.id


def sent(store, endpoint_id, cid):
    """The payloads of the endpoint's deliveries, as the relay would send them."""
    out = []
    for d in store.webhooks.list_deliveries(endpoint_id, limit=20):
        events = store.webhooks.list_turn_events(cid, through_seq=d.seq)
        out.append(payload(d.event_type, conversation_id=cid, seq=d.seq, ref=d.ref,
                           turn=events, title=None, describe=lambda name: None))
    return sorted(out, key=lambda p: p["type"])


def test_a_failed_turn_sends_budget_exceeded_beside_turn_failed(store, clock, providers):
    hook = endpoint(store, "acme")
    runtime = runtime_with(store, clock, providers, {"acme": TokenBudgets(tokens_per_day=1)})
    cid, _ = turn(runtime, clock, ACME)
    budget, failed = sent(store, hook, cid)
    assert (budget["type"], failed["type"]) == ("budget.exceeded", "turn.failed")
    assert failed["data"]["error"]["code"] == "budget_exceeded"
    spent = budget["data"]["budget"]
    assert {k: spent[k] for k in ("tenant", "scope", "period", "limit", "agent",
                                  "conversation_id", "on_exceeded")} == {
        "tenant": "acme", "scope": "tenant", "period": "day", "limit": 1, "agent": None,
        "conversation_id": cid, "on_exceeded": "fail"}
    assert spent["spent"] >= 1 and spent["resets_at"] == "2026-11-22T00:00:00.000000Z"


def test_a_waiting_turn_sends_budget_exceeded_once_however_often_it_is_redriven(
        store, clock, providers):
    hook = endpoint(store, "acme")
    runtime = runtime_with(store, clock, providers, {"acme": TokenBudgets(
        tokens_per_day=1, on_exceeded="wait")})
    commands = Commands(runtime.store, runtime.registry, clock=clock)
    conv = commands.create_conversation(ACME, {"script": WEATHER})
    drain(runtime, commands.post_message(conv.id, "hello", ACME)[1])
    for _ in range(3):  # early re-drives (the ETA horizon, a sweep): held again, told once
        clock.tick(120)
        drain(runtime, runtime.advance(conv.id))
    (budget,) = sent(store, hook, conv.id)
    assert budget["data"]["budget"]["on_exceeded"] == "wait"
    assert budget["data"]["budget"]["resets_at"] == "2026-11-22T00:00:00.000000Z"
    assert len(providers.calls) == 1
