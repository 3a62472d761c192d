"""The openai, anthropic and openai_responses adapters against their strict emulators: one test body each.

Every request goes through the official SDK to a real HTTP server on 127.0.0.1, which
checks it with rules of its own and streams the provider's wire format back.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings

import agentq
from agentq.commands import Commands
from agentq.config import Config
from agentq.core.render import render
from agentq.core.request import CallRef, Message, Request
from agentq.runtime.model_call import ModelCall, RoundInfo, StepTimedOut
from agentq.providers.base import Delta, ModelResponse
from agentq.providers.errors import ContextTooLong, ProviderError
from agentq.tenancy.access import provider_for
from agentq.live.pubsub import PubSub
from agentq.runtime import Runtime
from agentq.runtime.model_call import ModelCall, RoundInfo, StepTimedOut
from agentq.runtime.timers import Timers
from agentq.store import ModelCallRecord
from agentq.tools import Registry
from agentq.core.scope import Scope
from tests.core import builders as b
from tests.core.strategies import conversation_logs
from tests.support.announce import recording, unheard
from tests.support.drive import drain
from tests.support.emulators import Call, Fail, Reply, Reset, Stall
from tests.support.emulators.kit import HELLO, Kit, MAX_TOKENS_FIELD, WEATHER, kit_fixtures, running
from tests.support.emulators.shapes import SHAPES
from tests.support.rules import Rules

PROVIDERS = ["openai", "anthropic", "openai_responses"]
SCOPE = Scope(tenant="t1", user="u1")
HANGUP_WITHIN_S = 1.0


served, kit = kit_fixtures(*PROVIDERS)


class Recorded:
    """What ModelCall publishes and counts, and the sleeps it asks for."""

    def __init__(self) -> None:
        self.published: list[tuple[str, dict]] = []
        self.retries = 0
        self.sleeps: list[float] = []

    def model_call(self, kit: Kit, max_attempts: int = 4) -> ModelCall:
        def count(step_key: str) -> None:
            self.retries += 1

        return ModelCall(kit.provider(), recording(self.published),
                         count, timers=Timers(), max_attempts=max_attempts,
                         sleep=self.sleeps.append)

    def notices(self) -> list[dict]:
        return [data for kind, data in self.published if kind == "retry"]


def call_through_model_step(
    kit: Kit, recorded: Recorded, *, timeout_s: float = 30.0, **options
) -> ModelResponse:
    """One call as the runtime makes it: retries, notices and the step's time limit."""
    info = RoundInfo("conv-1", "turn-1", "round-1", "step-1")
    ctx = kit.ctx(kit.settings(**options))
    return recorded.model_call(kit).run(HELLO, ctx, info, threading.Event(), timeout_s=timeout_s)


# ---- answers --------------------------------------------------------------------------------------


def test_text_streams_as_numbered_deltas_then_one_response(kit: Kit) -> None:
    kit.emulator.then(Reply(text="It is sunny in Oslo.", chunks=4))
    items = kit.run()
    deltas = [item for item in items if isinstance(item, Delta)]
    assert [d.index for d in deltas] == list(range(len(deltas))) and len(deltas) >= 3
    assert "".join(d.text for d in deltas) == "It is sunny in Oslo."
    assert isinstance(items[-1], ModelResponse)
    assert items[-1].text == "It is sunny in Oslo." and items[-1].finish_reason == "stop"


def test_parallel_tool_calls_are_assembled_whole_with_their_arguments(kit: Kit) -> None:
    kit.emulator.then(Reply(text="Let me check.", calls=(
        Call("get_weather", {"city": "Oslo"}), Call("get_weather", {"city": "Bergen", "days": [1, 2]}),
    )))
    response = kit.answer()
    assert [(c.name, c.args) for c in response.tool_calls] == [
        ("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Bergen", "days": [1, 2]}),
    ]
    assert len({c.id for c in response.tool_calls}) == 2 and all(c.id for c in response.tool_calls)
    assert response.finish_reason == "tool_calls"


def test_a_call_without_arguments_gets_an_empty_object(kit: Kit) -> None:
    kit.emulator.then(Reply(text="", calls=(Call("get_weather", ""),)))
    assert kit.answer().tool_calls[0].args == {}


@pytest.mark.parametrize("raw", ['{"city": "Oslo"', "not json at all", '["a list"]'])
def test_malformed_argument_json_is_kept_raw_and_fails_validation_readably(kit: Kit, raw: str) -> None:
    kit.emulator.then(Reply(text="", calls=(Call("get_weather", raw),)))
    call = kit.answer().tool_calls[0]
    assert call.args == {"__raw__": raw}

    @agentq.tool
    def get_weather(city: str) -> str:
        """Weather."""
        return "sunny"

    problem = Registry([get_weather]).check(call.name, call.args)
    assert problem is not None and problem.status == "error" and "__raw__" in problem.output


def test_usage_is_reported_in_input_and_output_tokens(kit: Kit) -> None:
    kit.emulator.then(Reply(text="Sunny."))
    usage = kit.answer().usage
    prompt = usage["input_tokens"] + usage.get("cache_creation_input_tokens", 0)  # Anthropic caches it
    assert prompt > 0 and usage["output_tokens"] > 0


def test_a_length_stop_is_reported_as_length(kit: Kit) -> None:
    kit.emulator.then(Reply(text="It is sun", finish="max_tokens" if kit.name == "anthropic" else "length"))
    assert kit.answer().finish_reason == "length"


def test_the_body_recorded_as_sent_is_exactly_what_the_server_received(kit: Kit) -> None:
    response = kit.answer(settings=kit.settings(
        temperature=0.25, max_tokens=321, extra_body={"metadata": {"user_id": "u-1"}, "top_p": 0.5},
    ))
    received = kit.emulator.received[-1]
    assert response.sent == received
    assert received["temperature"] == 0.25 and received[MAX_TOKENS_FIELD[kit.name]] == 321
    assert received["metadata"] == {"user_id": "u-1"} and received["top_p"] == 0.5
    assert received["stream"] is True and received["model"] == kit.settings().model
    assert response.latency_ms is not None and response.latency_ms >= 0


def test_extra_body_adds_options_but_never_replaces_the_rendered_request(kit: Kit) -> None:
    settings = kit.settings(temperature=0.1, extra_body={"stream": False, "temperature": 1.5, "top_p": 0.9})
    response = kit.answer(settings=settings)
    assert response.sent == kit.emulator.received[-1]
    assert response.sent["stream"] is True and response.sent["temperature"] == 0.1
    assert response.sent["top_p"] == 0.9


# ---- every shape the core produces is accepted ---------------------------------------------------


@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES))
def test_every_conversation_shape_of_the_core_is_accepted(kit: Kit, shape: str) -> None:
    request = render(SHAPES[shape], [WEATHER])
    response = kit.answer(request)
    assert not kit.emulator.refused, kit.emulator.refused
    assert response.text == "ok"


@hypothesis_settings(max_examples=25, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(log=conversation_logs(max_turns=4))
def test_random_valid_logs_rendered_by_the_core_are_accepted(kit: Kit, log) -> None:
    request = render(b.view(log), [WEATHER])
    kit.answer(request)  # a refusal raises a permanent ProviderError with the emulator's reason


def test_the_emulator_is_strict_an_unanswered_call_is_refused_with_a_400(kit: Kit) -> None:
    unpaired = Request(system="", model="m", messages=(
        Message("user", "q"),
        Message("assistant", "", tool_calls=(CallRef("c1", "get_weather", {}),)),
        Message("user", "next"),
    ))
    recorded = Recorded()
    with pytest.raises(ProviderError) as raised:
        recorded.model_call(kit).run(unpaired, kit.ctx(), RoundInfo("c", None, "r", "s"),
                                     threading.Event(), timeout_s=30)
    assert raised.value.status == 400 and not raised.value.transient
    assert "c1" in raised.value.message and len(kit.emulator.received) == 1


def test_a_context_too_long_is_its_own_error_and_not_retried(kit: Kit) -> None:
    kit.emulator.max_context_tokens = 10
    recorded = Recorded()
    with pytest.raises(ContextTooLong):
        call_through_model_step(kit, recorded)
    assert len(kit.emulator.received) == 1 and recorded.retries == 0


# ---- failures: retried or not as classified --------------------------------------------------------


@pytest.mark.parametrize("failure", [
    Fail(500), Fail(503), Fail(529), Fail(408), Reset(), Reply(text="half", cut=True),
    Reply(text="half", stop_early=True),
], ids=["500", "503", "529", "408", "connection-reset", "reset-mid-stream", "stream-ends-unfinished"])
def test_transient_failures_are_retried_with_a_notice_each(kit: Kit, failure) -> None:
    kit.emulator.then(failure, failure, Reply(text="recovered"))
    recorded = Recorded()
    response = call_through_model_step(kit, recorded)
    assert response.text == "recovered" and len(kit.emulator.received) == 3
    notices = recorded.notices()
    assert recorded.retries == 2 and [n["attempt"] for n in notices] == [1, 2]
    assert all(n["transient"] for n in notices)


def test_a_429_waits_at_least_its_retry_after(kit: Kit) -> None:
    kit.emulator.then(Fail(429, "slow down", headers={"retry-after": "7"}), Reply(text="after the wait"))
    recorded = Recorded()
    assert call_through_model_step(kit, recorded).text == "after the wait"
    assert recorded.sleeps and recorded.sleeps[0] >= 7.0
    assert recorded.notices()[0]["next_delay_s"] >= 7.0


def test_a_read_timeout_is_retried(kit: Kit) -> None:
    kit.emulator.then(Stall(2.0), Reply(text="in time"))
    recorded = Recorded()
    response = call_through_model_step(kit, recorded, limits={"read_timeout_s": 0.3})
    assert response.text == "in time" and recorded.retries == 1


def test_an_error_event_inside_the_stream_is_retried(kit: Kit) -> None:
    kind = "overloaded_error" if kit.name == "anthropic" else "server_error"
    kit.emulator.then(Reply(text="partial", error=kind), Reply(text="whole"))
    recorded = Recorded()
    assert call_through_model_step(kit, recorded).text == "whole"
    assert recorded.retries == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_permanent_failures_are_not_retried(kit: Kit, status: int) -> None:
    kit.emulator.then(Fail(status, f"refused with {status}"))
    recorded = Recorded()
    with pytest.raises(ProviderError) as raised:
        call_through_model_step(kit, recorded)
    assert raised.value.status == status and not raised.value.transient
    assert len(kit.emulator.received) == 1 and recorded.retries == 0 and not recorded.notices()


def test_a_wrong_key_is_a_permanent_401(kit: Kit) -> None:
    wrong = {**kit.env, kit.key_variable: "sk-wrong-0000000000000000000000"}
    with pytest.raises(ProviderError) as raised:
        kit.run(env=wrong)
    assert raised.value.status == 401 and not raised.value.transient


# ---- cancellation hangs up ------------------------------------------------------------------------


def _cancel_when_text_arrives(kit: Kit, reply: Reply) -> tuple[list, float]:
    kit.emulator.then(reply)
    cancel = threading.Event()
    items: list = []
    cancelled_at = 0.0
    for item in kit.provider().stream(HELLO, kit.ctx(), cancel):
        items.append(item)
        if isinstance(item, Delta) and not cancel.is_set():
            # Set from another thread while the adapter is blocked reading the next bytes.
            threading.Timer(0.2, cancel.set).start()
            cancelled_at = time.monotonic() + 0.2
    return items, cancelled_at


def test_a_cancel_mid_stream_closes_the_connection_at_once(kit: Kit) -> None:
    items, cancelled_at = _cancel_when_text_arrives(kit, Reply(text="Thinking about it", hold=True))
    assert not any(isinstance(item, ModelResponse) for item in items)
    hung_up_at = kit.emulator.wait_for_hangup()
    assert hung_up_at is not None and hung_up_at - cancelled_at < HANGUP_WITHIN_S


def test_a_cancel_before_the_answer_starts_closes_the_connection(kit: Kit) -> None:
    kit.emulator.then(Stall(10.0))
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    assert kit.run(cancel=cancel) == []
    assert time.monotonic() - started < 0.2 + HANGUP_WITHIN_S
    assert kit.emulator.wait_for_hangup() is not None


def test_a_cancel_already_set_sends_nothing(kit: Kit) -> None:
    cancel = threading.Event()
    cancel.set()
    assert kit.run(cancel=cancel) == [] and kit.emulator.received == []


def test_the_step_time_limit_hangs_up_the_stream(kit: Kit) -> None:
    kit.emulator.then(Reply(text="slow", hold=True))
    started = time.monotonic()
    with pytest.raises(StepTimedOut):
        call_through_model_step(kit, Recorded(), timeout_s=0.4)
    assert time.monotonic() - started < 0.4 + HANGUP_WITHIN_S
    assert kit.emulator.wait_for_hangup() is not None


def test_a_stream_that_ends_unfinished_is_a_transient_incomplete_answer(kit: Kit) -> None:
    kit.emulator.then(Reply(text="half an answ", stop_early=True))
    with pytest.raises(ProviderError) as raised:
        kit.run()
    assert raised.value.code == "incomplete_stream" and raised.value.transient


# ---- secrets ---------------------------------------------------------------------------------------


def test_the_key_is_never_logged_even_at_debug_level(kit: Kit, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    kit.emulator.then(Reply(text="fine"), Fail(500), Reply(text="fine again"))
    kit.answer()
    recorded = Recorded()
    call_through_model_step(kit, recorded)
    with pytest.raises(ProviderError):
        kit.run(env={**kit.env, kit.key_variable: "sk-wrong-but-secret-1234567890abcdef"})
    assert caplog.records, "debug logging was on"
    for record in caplog.records:
        text = record.getMessage() + repr(vars(record))
        assert kit.emulator.api_key not in text
        assert "sk-wrong-but-secret" not in text and "567890abcdef" not in text


def test_error_messages_never_carry_the_key(kit: Kit) -> None:
    secret = "sk-proj-Secret0123456789abcdefghij"
    call = ModelCall(kit.provider({**kit.env, kit.key_variable: secret}), unheard(),
                     lambda step_key: None, timers=Timers(), max_attempts=1)
    with pytest.raises(ProviderError) as raised:
        call.run(HELLO, kit.ctx(), RoundInfo("c", None, "r", "s"), threading.Event(), timeout_s=30)
    assert raised.value.status == 401
    for fragment in (secret, secret[-4:], secret[:12]):
        assert fragment not in str(raised.value) and fragment not in raised.value.message
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_the_key_comes_from_the_variable_the_operators_profile_names(kit: Kit) -> None:
    env = {"TEAM_MODEL_KEY": kit.emulator.api_key}
    assert kit.answer(env=env, profile={"key_env": "TEAM_MODEL_KEY"}).text == "ok"
    assert kit.emulator.received, "the call went to the profile's endpoint"


def test_a_missing_key_is_a_permanent_error_that_names_the_profile_not_the_variable(
    kit: Kit, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(ProviderError) as raised:
        kit.run(env={}, profile={"key_env": "NOT_SET_ANYWHERE"})
    assert raised.value.code == "missing_api_key" and not raised.value.transient
    assert "NOT_SET_ANYWHERE" not in raised.value.message and repr(kit.name) in raised.value.message
    assert kit.emulator.received == []
    assert "NOT_SET_ANYWHERE" in caplog.text  # the operator's log says which variable


def test_the_profiles_endpoint_is_the_only_one_the_environment_cannot_move_it(kit: Kit) -> None:
    dead = "http://127.0.0.1:9/v1"
    env = {**kit.env, "OPENAI_BASE_URL": dead, "ANTHROPIC_BASE_URL": dead}
    assert kit.answer(env=env).text == "ok" and kit.emulator.received


def test_stored_settings_name_the_profile_and_hold_no_key(kit: Kit, store) -> None:
    info = store.conversations.create(tenant="t1", settings=kit.settings(), now=b.T0)
    loaded = store.conversations.load(info.id).settings.model_dump()
    assert loaded["profile"] == kit.name and "base_url" not in loaded and "api_key_ref" not in loaded
    assert kit.emulator.api_key not in json.dumps(loaded)


# ---- the audit ------------------------------------------------------------------------------------


def test_an_audit_row_holds_exactly_the_body_that_was_sent(kit: Kit, store) -> None:
    info = store.conversations.create(tenant="t1", settings=kit.settings(), now=b.T0)
    request = render(SHAPES["multi_tool_rounds"], [WEATHER])
    response = kit.answer(request, settings=kit.settings(temperature=0.5))
    store.audit.record(ModelCallRecord(
        id="audit-1", conversation_id=info.id, step_key="step-1", rendered_context=response.sent,
        model=kit.settings().model, usage=response.usage, latency_ms=response.latency_ms,
        summary_version=None, evictions=[], created_at=b.T0,
    ))
    [row] = store.audit.list_of(info.id)
    assert row.rendered_context == kit.emulator.received[-1]
    assert row.usage == response.usage and row.latency_ms == response.latency_ms
    assert row.model == kit.settings().model and row.step_key == "step-1" and row.created_at == b.T0


def test_old_audit_rows_are_deleted_by_their_ttl(kit: Kit, store) -> None:
    info = store.conversations.create(tenant="t1", settings=kit.settings(), now=b.T0)
    for hours in (0, 1, 2):
        store.audit.record(ModelCallRecord(
            id=f"audit-{hours}", conversation_id=info.id, step_key=None, rendered_context={"n": hours},
            model="m", usage={}, latency_ms=1, summary_version=None, evictions=None,
            created_at=b.T0 + timedelta(hours=hours),
        ))
    assert store.audit.delete_before(before=b.T0 + timedelta(hours=1, minutes=30)) == 2
    assert [row.rendered_context for row in store.audit.list_of(info.id)] == [{"n": 2}]


# ---- the whole loop -------------------------------------------------------------------------------


def test_a_turn_through_the_runtime_answers_bad_arguments_to_the_model(kit: Kit, store) -> None:
    calls = (Call("get_weather", {"city": "Oslo"}), Call("get_weather", "{oops"))
    kit.emulator.then(Reply(text="Checking.", calls=calls),
                      Reply(text="Cold in Oslo; the second call was malformed."))
    registry = Registry.from_modules(["agentq.tools.demo"])
    runtime = Runtime(store=store, registry=registry, pubsub=PubSub("embedded://provider-tests"),
                      config=Config(), rules=Rules(providers=kit.access().provider_for),
                      sleep=lambda s: None)
    commands = Commands(store, registry, policy=kit.policy())
    conversation = commands.create_conversation(SCOPE, kit.settings(tools=["get_weather"]))
    _, follow = commands.post_message(conversation.id, "Weather in Oslo?", SCOPE)
    drain(runtime, follow)
    results = [e.content for e in store.log.list_events(conversation.id) if e.type == "tool_result"]
    assert [r["status"] for r in results] == ["error", "ok"]  # the bad call is answered at once
    assert "__raw__" in results[0]["output"]
    second = kit.emulator.received[-1]
    assert len(kit.emulator.received) == 2 and not kit.emulator.refused
    assert "Cold in Oslo" in store.log.list_events(conversation.id)[-1].content["text"]
    assert "__raw__" in json.dumps(second)  # the model is shown what it sent, and why it failed


# ---- one client and connection pool per endpoint and key ------------------------------------------------


def test_calls_to_one_endpoint_reuse_one_connection_across_attempts_and_steps(kit: Kit) -> None:
    with running(kit.name) as emulator:  # a fresh endpoint: nothing pooled for it yet
        fresh = Kit(kit.name, emulator)
        emulator.then(Fail(500), Reply(text="one"), Reply(text="two"))
        recorded = Recorded()
        info = RoundInfo("conv-1", "turn-1", "round-1", "step-1")
        first = recorded.model_call(fresh).run(HELLO, fresh.ctx(), info, threading.Event(), timeout_s=30)
        second = fresh.answer()  # another step, another provider object
        assert (first.text, second.text, recorded.retries) == ("one", "two", 1)
        assert len(emulator.received) == 3 and emulator.connections == 1


def test_a_cancelled_call_does_not_poison_the_pool_for_the_next(kit: Kit) -> None:
    with running(kit.name) as emulator:
        fresh = Kit(kit.name, emulator)
        assert fresh.answer().text == "ok"
        items, _ = _cancel_when_text_arrives(fresh, Reply(text="Thinking about it", hold=True))
        assert emulator.wait_for_hangup() is not None
        assert fresh.answer().text == "ok" and emulator.connections == 2
