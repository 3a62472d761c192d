"""Guardrails and instructions as code in the runtime, on a real store (SQLite and Postgres)."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from agentq.cli.check import check_conversation
from agentq.commands import Commands
from agentq.config import Config
from agentq.core.agents import AgentDefinition
from agentq.core.guardrails import GUARDRAIL_TRIPPED, digest
from agentq.core.settings import Settings
from agentq.errors import InvalidInput
from agentq.runtime import Runtime
from agentq.store.webhooks import WebhookEndpoint
from agentq.tools import Registry
from agentq.webhooks.payloads import payload
from tests.support import guardrails_for_tests as checks
from tests.support import tools_for_tests as tool_calls
from tests.support.drive import Recorder, drain
from tests.support.rules import Rules
from tests.support.turn_fixtures import clock  # noqa: F401
from tests.support.turns import SCOPE, WEATHER, CountingProviders, start, types

MODULES = ["agentq.tools.demo", "tests.support.tools_for_tests", "tests.support.guardrails_for_tests"]


class SeeingProviders(CountingProviders):
    """Counts the model calls and keeps the system prompt each was sent."""

    def __init__(self) -> None:
        super().__init__()
        self.systems: list[str] = []

    def __call__(self, settings):
        inner, systems = super().__call__(settings), self.systems

        class Seeing:
            def stream(self, request, ctx, cancel):
                systems.append(request.system)
                return inner.stream(request, ctx, cancel)

        return Seeing()


@pytest.fixture
def providers():
    return SeeingProviders()


@pytest.fixture
def runtime(store, clock, providers):  # noqa: F811
    return Runtime(store=store, registry=Registry.from_modules(MODULES), pubsub=Recorder(),
                   config=Config(lease_s=30.0), clock=clock, rules=Rules(providers=providers),
                   sleep=lambda s: None)


@pytest.fixture
def commands(runtime, clock):  # noqa: F811
    return Commands(runtime.store, runtime.registry, clock=clock,
                    close_round=runtime.pubsub.close_round)


def _error(store, cid):
    return next(e for e in store.log.list_events(cid) if e.type == "error")


def test_a_tripped_input_guardrail_fails_the_turn_before_the_model_is_called(
        store, runtime, commands, providers):
    cid, _ = start(commands, runtime, [{"text": "The secret is 42."}], text="tell me the secret",
                   input_guardrails=["no_secrets"])
    assert types(store, cid) == ["user_msg", "guardrail", "error"]
    assert providers.calls == 0
    error = _error(store, cid)
    assert error.content["code"] == GUARDRAIL_TRIPPED
    assert error.content["details"] == {"guardrail": "no_secrets", "phase": "input",
                                        "info": {"matched": "secret"}}
    assert store.conversations.load(cid).fsm.state == "failed"
    assert check_conversation(store, cid) == []


def test_a_trip_is_a_turn_failed_webhook_naming_the_guardrail_and_its_verdict(
        store, runtime, commands):
    now = datetime(2026, 11, 21, tzinfo=UTC)
    hook = WebhookEndpoint(
        id="we_t1", tenant="t1", url="https://hooks.example.com/x", event_types=["turn.failed"],
        sealed_secret="sealed", previous_sealed=None, previous_until=None, enabled=True,
        disabled_reason=None, failing_since=None, created_at=now, updated_at=now)
    assert store.webhooks.add_endpoint(hook, max_per_tenant=10)
    cid, _ = start(commands, runtime, [{"text": "hi"}], text="a secret",
                   input_guardrails=["no_secrets"])
    (delivery,) = store.webhooks.list_deliveries(hook.id, limit=10)
    sent = payload(delivery.event_type, conversation_id=cid, seq=delivery.seq, ref=delivery.ref,
                   turn=store.webhooks.list_turn_events(cid, through_seq=delivery.seq),
                   title=None, describe=lambda name: None)
    assert sent["type"] == "turn.failed"
    assert sent["data"]["error"] == {
        "code": GUARDRAIL_TRIPPED, "message": "the input guardrail 'no_secrets' tripped",
        "details": {"guardrail": "no_secrets", "phase": "input", "info": {"matched": "secret"}}}


def test_a_passing_input_guardrail_records_its_verdict_before_the_answer(store, runtime, commands):
    cid, _ = start(commands, runtime, WEATHER, input_guardrails=["no_secrets"])
    events = store.log.list_events(cid)
    assert [e.type for e in events][:3] == ["user_msg", "guardrail", "assistant_msg"]
    assert events[1].content == {"name": "no_secrets", "phase": "input", "tripped": False,
                                 "info": None}
    assert events[-1].content["text"] == "Cold in Oslo."
    assert sum(e.type == "guardrail" for e in events) == 1  # the first round only
    assert check_conversation(store, cid) == []


def test_an_output_guardrail_that_trips_fails_the_turn_and_keeps_the_answer_out_of_the_log(
        store, runtime, commands):
    cid, _ = start(commands, runtime, [{"text": "You are rude."}], output_guardrails=["polite_answer"])
    events = store.log.list_events(cid)
    assert [e.type for e in events] == ["user_msg", "guardrail", "error"]
    assert not any("rude" in str(e.content.get("text", "")) for e in events)
    assert _error(store, cid).content["details"]["info"] == {"phase": "output", "user": "u1"}
    assert store.conversations.load(cid).fsm.state == "failed"


def test_output_guardrails_read_only_the_final_answer(store, runtime, commands):
    cid, _ = start(commands, runtime, WEATHER, output_guardrails=["polite_answer"])
    events = store.log.list_events(cid)
    verdicts = [e for e in events if e.type == "guardrail"]
    assert len(verdicts) == 1 and verdicts[0].content["phase"] == "output"
    assert events[-2:] == [verdicts[0], events[-1]] and events[-1].type == "assistant_msg"
    assert store.conversations.load(cid).fsm.state == "idle"


def test_a_guardrail_that_raises_trips(store, runtime, commands):
    cid, _ = start(commands, runtime, [{"text": "hi"}], input_guardrails=["broken"])
    assert _error(store, cid).content["details"]["info"] == {
        "error": "RuntimeError: the checker is down"}


def test_running_the_steps_again_records_each_verdict_once(store, runtime, commands):
    checks.RUNS.clear()
    cid, _ = start(commands, runtime, WEATHER, input_guardrails=["no_secrets"])
    before = store.log.list_events(cid)
    for _ in range(3):
        drain(runtime, runtime.advance(cid))
    assert store.log.list_events(cid) == before
    assert checks.RUNS["no_secrets"] == 1


def test_a_parallel_guardrail_that_trips_hangs_the_model_call_up(store, runtime, commands):
    checks.RELEASE.set()  # it answers at once; the model would take a minute
    slow = [{"text": "a long answer", "chunks": 10, "delay_s": 60.0}]
    cid, _ = start(commands, runtime, slow, text="something bad",
                   input_guardrails=["watchful"])
    assert types(store, cid) == ["user_msg", "guardrail", "error"]
    assert _error(store, cid).content["details"]["guardrail"] == "watchful"
    deltas = [d for kind, d in runtime.pubsub.notices if kind == "delta"]
    assert len(deltas) < 10  # the stream was closed before its end


def test_a_parallel_guardrail_that_passes_lets_the_answer_through(store, runtime, commands):
    checks.RELEASE.set()
    cid, _ = start(commands, runtime, [{"text": "fine"}], input_guardrails=["watchful"])
    assert types(store, cid) == ["user_msg", "guardrail", "assistant_msg"]


def test_held_deltas_publish_nothing_before_the_answer_is_committed(store, runtime, commands):
    cid, _ = start(commands, runtime, [{"text": "held back", "chunks": 4}], hold_deltas=True,
                   output_guardrails=["polite_answer"])
    assert types(store, cid)[-1] == "assistant_msg"
    assert [d for kind, d in runtime.pubsub.notices if kind == "delta"] == []


def test_settings_that_name_an_unknown_guardrail_are_refused(commands):
    with pytest.raises(InvalidInput) as refused:
        commands.create_conversation(SCOPE, {"input_guardrails": ["no_such_check"]})
    assert refused.value.code == "unknown_guardrail"


def test_instructions_read_the_acting_user_and_the_answer_records_them(store, runtime, commands):
    cid, _ = start(commands, runtime, WEATHER, system="Be brief.", instructions="for_the_user")
    answers = [e for e in store.log.list_events(cid) if e.type == "assistant_msg"]
    told = "Be brief. You are talking to u1 of t1."
    assert answers[0].content["instructions"] == {"name": "for_the_user", "digest": digest(told),
                                                  "text": told}
    assert answers[1].content["instructions"] == {"name": "for_the_user", "digest": digest(told)}


def test_instructions_are_what_the_model_is_sent(store, runtime, commands, providers):
    start(commands, runtime, [{"text": "ok"}], system="Be brief.", instructions="for_the_user")
    assert providers.systems == ["Be brief. You are talking to u1 of t1."]


def test_a_retried_turn_runs_its_input_guardrails_again(store, runtime, commands):
    checks.RUNS.clear()
    cid, _ = start(commands, runtime, [{"text": "hi"}], text="the secret", input_guardrails=["no_secrets"])
    drain(runtime, commands.retry(cid, SCOPE))
    assert types(store, cid) == ["user_msg", "guardrail", "error", "error", "guardrail", "error"]
    assert checks.RUNS["no_secrets"] == 2
    assert check_conversation(store, cid) == []


LOOKUP_SECRET = [{"tool_calls": [{"name": "lookup", "args": {"key": "secret"}}]}, {"text": "Refused."}]


def test_a_tool_input_guardrail_that_trips_refuses_the_call_and_the_turn_goes_on(
        store, runtime, commands):
    tool_calls.CALLS.clear()
    cid, _ = start(commands, runtime, LOOKUP_SECRET, tools=["lookup"],
                   tool_input_guardrails=["no_secrets"])
    events = store.log.list_events(cid)
    assert [e.type for e in events] == ["user_msg", "assistant_msg", "tool_call", "guardrail",
                                        "tool_result", "assistant_msg"]
    assert events[3].content["phase"] == "tool_input" and events[3].content["tripped"]
    assert events[4].content["status"] == "error"
    assert events[4].content["output"] == (
        "the guardrail 'no_secrets' refused this call's arguments: {\"matched\":\"secret\"}")
    assert "lookup:secret" not in tool_calls.CALLS  # the tool never ran
    assert store.conversations.load(cid).fsm.state == "idle"
    assert check_conversation(store, cid) == []


def test_a_tool_output_guardrail_that_trips_withholds_the_result(store, runtime, commands):
    tool_calls.CALLS.clear()
    cid, _ = start(commands, runtime, LOOKUP_SECRET, tools=["lookup"],
                   tool_output_guardrails=["no_secrets"])
    result = next(e for e in store.log.list_events(cid) if e.type == "tool_result")
    assert result.content["status"] == "error" and "call's result" in result.content["output"]
    assert "value of secret" not in str(store.log.list_events(cid)[-3:])
    assert tool_calls.CALLS["lookup:secret"] == 1  # it ran; the model never read what it said
    assert check_conversation(store, cid) == []


def test_a_tool_call_its_guardrails_pass_runs_once_with_its_verdicts_recorded_once(
        store, runtime, commands):
    tool_calls.CALLS.clear()
    script = [{"tool_calls": [{"name": "lookup", "args": {"key": "k"}}]}, {"text": "Done."}]
    cid, _ = start(commands, runtime, script, tools=["lookup"],
                   tool_input_guardrails=["no_secrets"], tool_output_guardrails=["no_secrets"])
    before = store.log.list_events(cid)
    for call in store.calls.list_of(cid):
        drain(runtime, runtime.run_tool(cid, call.id))
    assert store.log.list_events(cid) == before
    phases = [e.content["phase"] for e in before if e.type == "guardrail"]
    assert phases == ["tool_input", "tool_output"]
    assert tool_calls.CALLS["lookup:k"] == 1


def test_a_tool_input_guardrail_refuses_a_once_call_before_its_start_is_marked(
        store, runtime, commands):
    tool_calls.CALLS.clear()
    script = [{"tool_calls": [{"name": "pay", "args": {"order": "secret-7", "amount": 5.0,
                                                       "seconds": 0}}]},
              {"text": "Refused."}]
    cid, _ = start(commands, runtime, script, tools=["pay"], tool_input_guardrails=["no_secrets"])
    (call,) = store.calls.list_of(cid)
    result = next(e for e in store.log.list_events(cid) if e.type == "tool_result")
    assert result.content["status"] == "error" and "no_secrets" in result.content["output"]
    assert call.started is None  # no takeover could take it for a run begun
    assert not any(k.startswith("pay:") for k in tool_calls.CALLS)
    assert store.conversations.load(cid).fsm.state == "idle"
    assert check_conversation(store, cid) == []


# Guardrails that are agents: the tenant's agent `judge` answers a verdict.

TRIPS = '{"tripped": true, "reason": "asks for a card number"}'
PASSES = '{"tripped": false, "reason": "nothing to stop"}'


def _judge(store, clock, answer: str, name: str = "judge") -> None:  # noqa: F811
    store.agents.create("t1", AgentDefinition(name=name, settings=Settings(
        system="Stop card numbers.", script=[{"text": answer}], script_repeat=True)), now=clock())


def _calls_by_agent(store, clock) -> dict:  # noqa: F811
    start_at = clock() - timedelta(days=1)
    rows = store.usage.report(tenant="t1", start=start_at, end=start_at + timedelta(days=2),
                              group_by="day", by=["agent"], limit=10)
    return {row.keys["agent"]: row.tokens.calls for row in rows}


def test_an_agent_input_guardrail_that_trips_fails_the_turn_and_its_call_is_counted(
        store, runtime, commands, providers, clock):  # noqa: F811
    _judge(store, clock, TRIPS)
    cid, _ = start(commands, runtime, [{"text": "Your card is 4111."}], text="my card?",
                   input_guardrails=["agent:judge"])
    events = store.log.list_events(cid)
    assert [e.type for e in events] == ["user_msg", "guardrail", "error"]
    verdict = events[1].content
    assert verdict["name"] == "agent:judge" and verdict["tripped"] is True
    assert verdict["info"] == {"reason": "asks for a card number"}
    assert verdict["agent"] == {"name": "judge", "version": 1} and verdict["usage"]["input_tokens"] > 0
    assert _error(store, cid).content["details"]["guardrail"] == "agent:judge"
    assert providers.calls == 1  # the judge's; the conversation's model was never called
    assert providers.systems[0].startswith("Stop card numbers.")
    assert _calls_by_agent(store, clock) == {"judge": 1}
    assert check_conversation(store, cid) == []


def test_an_agent_input_guardrail_that_passes_lets_the_turn_go_on_each_call_counted_under_its_agent(
        store, runtime, commands, providers, clock):  # noqa: F811
    _judge(store, clock, PASSES)
    cid, _ = start(commands, runtime, [{"text": "Hello."}], input_guardrails=["agent:judge"])
    assert types(store, cid) == ["user_msg", "guardrail", "assistant_msg"]
    assert providers.calls == 2
    assert _calls_by_agent(store, clock) == {"judge": 1, None: 1}


def test_an_agent_guardrail_that_answers_no_verdict_trips_as_a_raising_function_does(
        store, runtime, commands, clock):  # noqa: F811
    _judge(store, clock, "It looks fine to me.")
    cid, _ = start(commands, runtime, [{"text": "Hello."}], input_guardrails=["agent:judge"])
    assert types(store, cid) == ["user_msg", "guardrail", "error"]
    info = _error(store, cid).content["details"]["info"]
    assert info["error"] == "the guardrail agent answered no verdict: its answer is not JSON"
    assert info["answer"] == "It looks fine to me."


def test_an_agent_output_guardrail_that_trips_keeps_the_answer_out_of_the_log(
        store, runtime, commands, clock):  # noqa: F811
    _judge(store, clock, TRIPS)
    cid, _ = start(commands, runtime, [{"text": "Your card is 4111."}],
                   output_guardrails=["agent:judge"])
    events = store.log.list_events(cid)
    assert [e.type for e in events] == ["user_msg", "guardrail", "error"]
    assert not any("4111" in str(e.content) for e in events)
    assert _calls_by_agent(store, clock) == {"judge": 1, None: 1}  # both calls were paid for


def test_a_parallel_agent_guardrail_that_trips_hangs_the_model_call_up(
        store, runtime, commands, clock):  # noqa: F811
    _judge(store, clock, TRIPS)
    slow = [{"text": "a long answer", "chunks": 10, "delay_s": 60.0}]
    cid, _ = start(commands, runtime, slow, input_guardrails=[{"agent": "judge", "parallel": True}])
    assert types(store, cid) == ["user_msg", "guardrail", "error"]
    deltas = [d for kind, d in runtime.pubsub.notices if kind == "delta"]
    assert len(deltas) < 10


def test_an_agent_guardrail_runs_again_with_its_step_but_its_verdict_is_recorded_once(
        store, runtime, commands, providers, clock):  # noqa: F811
    _judge(store, clock, PASSES)
    cid, _ = start(commands, runtime, [{"text": "Hello."}], input_guardrails=["agent:judge"])
    before, calls = store.log.list_events(cid), providers.calls
    for _ in range(3):
        drain(runtime, runtime.advance(cid))
    assert store.log.list_events(cid) == before and providers.calls == calls
    assert _calls_by_agent(store, clock) == {"judge": 1, None: 1}


def test_a_guardrail_agent_the_tenant_may_not_use_is_refused_and_nothing_is_written(
        store, commands, clock):  # noqa: F811
    _judge(store, clock, PASSES, name="theirs")
    store.agents.create("t2", AgentDefinition(name="elsewhere", settings=Settings()), now=clock())
    for settings in ({"input_guardrails": ["agent:elsewhere"]},
                     {"output_guardrails": [{"agent": "nobody"}]}):
        with pytest.raises(InvalidInput) as refused:
            commands.create_conversation(SCOPE, settings)
        assert refused.value.code == "unknown_agent"
    with pytest.raises(ValidationError, match="a tool call's guardrails are functions"):
        commands.create_conversation(SCOPE, {"tool_input_guardrails": ["agent:theirs"]})
    assert store.conversations.list_ids(status=None) == []
