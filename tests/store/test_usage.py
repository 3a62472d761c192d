"""Usage rollups: every committed model call counted once, in its tenant's hour."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentq.commands import Commands
from agentq.config import Config
from agentq.core.scope import Scope
from agentq.core.token_budgets import EPOCH, WHOLE, Meter, meters_of, period_start
from agentq.core.usage import Tokens
from agentq.errors import Stale
from agentq.runtime import Runtime
from agentq.store import NewStep
from agentq.store.budget_totals import add_totals_txn
from agentq.store.step_commit import counted
from agentq.store.usage import UsageKey, add_usage_txn, usage_key
from agentq.tenancy.access import provider_for
from agentq.tools import Registry
from tests.support.clock import Clock
from tests.support.drive import Recorder, drain
from tests.support.rules import Rules

ACME = Scope(tenant="acme", user="u1")
EVIL = Scope(tenant="evil", user="u2")
WEATHER = [
    {"text": "Checking.", "tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}]},
    {"text": "Cold in Oslo.", "chunks": 3},
]


@pytest.fixture
def clock():
    return Clock(datetime(2026, 11, 21, 22, 59, 30, tzinfo=UTC))


@pytest.fixture
def runtime(store, clock):
    registry = Registry.from_modules(["agentq.tools.demo", "tests.support.tools_for_tests"])
    return Runtime(store=store, registry=registry, pubsub=Recorder(),
                   config=Config(lease_s=30.0, audit=True), clock=clock, sleep=lambda s: None)


@pytest.fixture
def commands(runtime, clock):
    return Commands(runtime.store, runtime.registry, clock=clock,
                    close_round=runtime.pubsub.close_round)


def turn(commands, runtime, scope, script, text="hello"):
    conv = commands.create_conversation(scope, {"script": script})
    _, follow = commands.post_message(conv.id, text, scope)
    drain(runtime, follow)
    return conv.id


def whole(store, tenant):
    start = datetime(2026, 1, 1, tzinfo=UTC)
    rows = store.usage.report(tenant=tenant, start=start, end=start + timedelta(days=365),
                              group_by="day", by=[], limit=100)
    return sum((r.tokens for r in rows), Tokens())


def audited(store, cid):
    return sum((Tokens.of_call(call.usage) for call in store.audit.list_of(cid)), Tokens())


def test_the_rollups_count_exactly_the_recorded_model_calls(store, runtime, commands, clock):
    first = turn(commands, runtime, ACME, WEATHER)
    clock.tick(60)  # the next hour: another rollup row
    second = turn(commands, runtime, ACME, WEATHER, text="and again")
    calls = audited(store, first) + audited(store, second)
    assert calls.calls == 4 and calls.input_tokens > 0 and calls.output_tokens > 0
    assert whole(store, "acme") == calls
    in_messages = sum((Tokens.of_call(e.content.get("usage"))
                       for cid in (first, second) for e in store.log.list_events(cid)
                       if e.type == "assistant_msg"), Tokens())
    assert in_messages == calls


def test_running_every_step_again_counts_nothing_twice(store, runtime, commands):
    cid = turn(commands, runtime, ACME, WEATHER)
    before = whole(store, "acme")
    for _ in range(3):
        drain(runtime, runtime.advance(cid))
        for call in store.calls.list_of(cid):
            drain(runtime, runtime.run_tool(cid, call.id))
    assert whole(store, "acme") == before == audited(store, cid)


def test_a_tenants_usage_counts_only_its_own_calls(store, runtime, commands):
    turn(commands, runtime, ACME, WEATHER)
    assert whole(store, "evil") == Tokens()
    theirs = turn(commands, runtime, EVIL, WEATHER[1:])
    assert whole(store, "evil") == audited(store, theirs)
    assert whole(store, None) == whole(store, "acme") + whole(store, "evil")


def test_an_hour_rollup_adds_calls_of_the_same_key_and_keeps_other_keys_apart(store):
    at = datetime(2026, 11, 21, 22, 10, tzinfo=UTC)
    cid = turn_free_conversation(store)
    key = UsageKey(tenant="acme", agent=None, profile="scripted", model=None, conversation_id=cid)
    one = Tokens(input_tokens=10, output_tokens=3, cached_tokens=4, reasoning_tokens=1, calls=1)
    with store.engine.begin() as conn:
        add_usage_txn(conn, key, one, at=at)
        add_usage_txn(conn, key, one, at=at + timedelta(minutes=40))
        add_usage_txn(conn, key, one, at=at + timedelta(minutes=50))  # 23:00: the next hour
        add_usage_txn(conn, UsageKey("acme", "support", "scripted", "m1", cid), one, at=at)
    rows = store.usage.report(tenant="acme", start=at, end=at + timedelta(hours=2),
                              group_by="hour", by=["agent", "model"], limit=10)
    assert [(r.start.hour, r.keys, r.tokens.calls) for r in rows] == [
        (22, {"agent": None, "model": None}, 2),
        (22, {"agent": "support", "model": "m1"}, 1),
        (23, {"agent": None, "model": None}, 1),
    ]
    assert rows[0].tokens == one + one
    days = store.usage.report(tenant="acme", start=at, end=at + timedelta(hours=2),
                              group_by="day", by=[], limit=10)
    assert [(d.start, d.tokens.calls) for d in days] == [
        (datetime(2026, 11, 21, tzinfo=UTC), 4)]
    later = store.usage.report(tenant="acme", start=at.replace(hour=23), end=at + timedelta(hours=2),
                               group_by="hour", by=[], limit=10)
    assert [(r.start.hour, r.tokens.calls) for r in later] == [(23, 1)]


def turn_free_conversation(store):
    commands = Commands(store, Registry.from_modules(["agentq.tools.demo"]))
    return commands.create_conversation(ACME, {}).id


def test_summary_calls_count_too(store, clock):
    sent: list[str] = []

    def counting(settings):
        inner = provider_for(settings)

        class Counted:
            def stream(self, request, ctx, cancel):
                sent.append(ctx.purpose)
                return inner.stream(request, ctx, cancel)

        return Counted()

    registry = Registry.from_modules(["agentq.tools.demo", "tests.support.tools_for_tests"])
    runtime = Runtime(store=store, registry=registry, pubsub=Recorder(), config=Config(),
                      clock=clock, rules=Rules(providers=counting), sleep=lambda s: None)
    commands = Commands(store, registry, clock=clock)
    conv = commands.create_conversation(ACME, {
        "script": [{"text": "A long enough answer to fill the context. " * 8}],
        "script_repeat": True, "compaction": {"max_context_tokens": 300, "min_keep_turns": 1}})
    for n in range(8):
        drain(runtime, commands.post_message(conv.id, f"question {n} " * 10, ACME)[1])
    summaries = store.log.list_summaries(conv.id)
    assert summaries and "summary" in sent
    answers = sum((Tokens.of_call(e.content.get("usage")) for e in store.log.list_events(conv.id)
                   if e.type == "assistant_msg"), Tokens())
    summarized = sum((Tokens.of_call(s.content["usage"]) for s in summaries), Tokens())
    counted = whole(store, "acme")
    assert summarized.input_tokens > 0
    assert counted.calls == len(sent)
    assert (counted.input_tokens, counted.output_tokens) == (
        answers.input_tokens + summarized.input_tokens,
        answers.output_tokens + summarized.output_tokens)


def test_the_budget_totals_match_the_rollups_of_the_running_periods(store, runtime, commands,
                                                                     clock):
    first = turn(commands, runtime, ACME, WEATHER)  # 22:59
    clock.tick(60)  # 23:00: a new hour, the same day and month
    second = turn(commands, runtime, ACME, WEATHER, text="and again")
    turn(commands, runtime, EVIL, WEATHER[1:])
    now = clock()

    def total(tokens: Tokens) -> int:
        return tokens.input_tokens + tokens.output_tokens

    def meter(period: str) -> Meter:
        return Meter("tenant", "", period, period_start(period, now))

    spent = store.usage.load_spent(second)
    this_hour = store.usage.report(tenant="acme", start=now, end=now + timedelta(hours=1),
                                   group_by="hour", by=[], limit=10)
    assert spent.of(meter("hour")) == total(this_hour[0].tokens) == total(audited(store, second))
    assert spent.of(meter("day")) == spent.of(meter("month")) == total(whole(store, "acme"))
    assert spent.of(Meter("conversation", second, WHOLE, EPOCH)) == total(audited(store, second))
    assert store.usage.load_spent(first).of(Meter("conversation", first, WHOLE, EPOCH)) == \
        total(audited(store, first))
    assert spent.agent is None and store.usage.load_spent("no-such-conversation") is None


def test_a_total_starts_afresh_in_a_later_period_and_a_late_commit_leaves_it_be(store):
    cid = turn_free_conversation(store)
    at = datetime(2026, 11, 21, 22, 10, tzinfo=UTC)

    def add(when: datetime, tokens: int) -> None:
        with store.engine.begin() as conn:
            add_totals_txn(conn, "acme", meters_of("support", cid, when), tokens)

    add(at, 5)
    add(at + timedelta(hours=1), 7)  # 23:10: the hour starts afresh, the day adds
    add(at, 100)  # a worker whose clock lags: not this hour's, not counted in it
    spent = store.usage.load_spent(cid)
    later = at + timedelta(hours=1)
    assert spent.of(Meter("tenant", "", "hour", period_start("hour", later))) == 7
    # the conversation is of no agent: the agent's totals are not its to read
    assert spent.agent is None and not any(m.scope == "agent" for m in spent.totals)
    assert spent.of(Meter("tenant", "", "day", period_start("day", later))) == 112
    assert spent.of(Meter("conversation", cid, WHOLE, EPOCH)) == 112


def of_conversation(tx) -> UsageKey:
    """Where a call of the locked conversation to its profile's default model counts."""
    c = tx.conversation
    return usage_key(c.id, tenant=c.tenant, settings=c.settings, agent=c.agent, parent=c.parent,
                     model=None)


def test_tokens_counted_with_a_finish_that_lost_its_step_are_rolled_back_with_it(store, clock):
    cid = turn_free_conversation(store)
    step = NewStep("llm-1", cid, "llm", {"after_seq": 0}, None, "task-llm-1", "acme")
    store.steps.schedule_and_claim(step, worker="w2", lease_s=30, now=clock(), max_attempts=5)
    spent = Tokens(input_tokens=10, output_tokens=3, calls=1)
    with pytest.raises(Stale), store.writes.locked(cid) as tx:  # w1 lost the step to w2
        finished, _ = tx.finish_seeing_inbox("llm-1", worker="w1", now=clock(),
                                             usage=counted(of_conversation(tx), spent, now=clock()))
        if not finished:
            raise Stale("the step is no longer ours")
    assert whole(store, "acme") == Tokens()
    assert store.usage.load_spent(cid).of(Meter("conversation", cid, WHOLE, EPOCH)) == 0
    with store.writes.locked(cid) as tx:  # the step's own worker counts them, with its finish
        assert tx.finish_scheduling("llm-1", worker="w2", calls=[], scheduled=[], now=clock(),
                                    usage=counted(of_conversation(tx), spent, now=clock()))
    assert whole(store, "acme") == spent
