"""The OpenAI adapter's own details, and the strictness of the OpenAI emulator.

What both adapters share (streaming, retries, cancellation, secrets, audit) is in
test_provider_contract.py.
"""
from __future__ import annotations

import threading
from types import SimpleNamespace as NS

import httpx2
import pytest

from agentq.core.keys import scripted_call_id
from agentq.core.render import render
from agentq.providers.answer import Answer
from agentq.providers.errors import ProviderError
from agentq.providers.openai_chat import _ChunkReader
from agentq.runtime.model_call import ModelCall, RoundInfo
from agentq.runtime.timers import Timers
from tests.support.announce import unheard
from tests.support.emulators import Fail, OpenAIEmulator
from tests.support.emulators.kit import HELLO, Kit, WEATHER, kit_fixtures
from tests.support.emulators.shapes import SHAPES


served, kit = kit_fixtures("openai")


def post(emulator: OpenAIEmulator, body: dict) -> httpx2.Response:
    headers = {"authorization": f"Bearer {emulator.api_key}"}
    return httpx2.post(emulator.base_url + "/chat/completions", json=body, headers=headers)


def chunk(*, content=None, calls=None, finish=None, index=0, usage=None) -> NS:
    delta = NS(content=content, refusal=None, tool_calls=calls)
    return NS(choices=[NS(index=index, delta=delta, finish_reason=finish)], usage=usage)


def fragment(index, *, call_id=None, name=None, arguments=None) -> NS:
    return NS(index=index, id=call_id, function=NS(name=name, arguments=arguments))


def read_all(*chunks: NS, step_key: str = "step-9") -> Answer:
    answer, reader = Answer(step_key), _ChunkReader()
    for item in chunks:
        reader.read(item, answer)
    return answer


# ---- the wire ---------------------------------------------------------------------------------------


def test_the_request_asks_for_a_stream_with_usage_and_keeps_tool_results_in_tool_messages(kit: Kit) -> None:
    kit.answer(render(SHAPES["multi_tool_rounds"], [WEATHER]))
    body = kit.emulator.received[-1]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "assistant", "tool"]
    assert [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"] == ["c1", "c2", "c3"]


def test_json_mode_goes_through_extra_body(kit: Kit) -> None:
    settings = kit.settings(extra_body={"response_format": {"type": "json_object"}})
    kit.answer(settings=settings)
    assert kit.emulator.received[-1]["response_format"] == {"type": "json_object"}


def test_the_sdk_sends_the_key_as_a_bearer_and_retries_nothing_itself(kit: Kit) -> None:
    kit.emulator.then(Fail(500))
    with pytest.raises(ProviderError):
        kit.run()
    assert len(kit.emulator.received) == 1
    assert kit.emulator.headers[-1]["authorization"] == f"Bearer {kit.emulator.api_key}"


def test_an_insufficient_quota_429_is_permanent(kit: Kit) -> None:
    kit.emulator.then(Fail(429, "You exceeded your current quota", type="insufficient_quota",
                           code="insufficient_quota"))
    call = ModelCall(kit.provider(), unheard(), lambda step_key: None, timers=Timers(), max_attempts=3,
                     sleep=lambda s: None)
    with pytest.raises(ProviderError) as raised:
        call.run(HELLO, kit.ctx(), RoundInfo("c", None, "r", "s"), threading.Event(), timeout_s=30)
    assert raised.value.code == "insufficient_quota" and not raised.value.transient
    assert len(kit.emulator.received) == 1


def test_the_masked_key_openai_echoes_in_a_401_is_scrubbed(kit: Kit) -> None:
    secret = "sk-live-0123456789abcdefWXYZ"
    with pytest.raises(ProviderError) as raised:
        kit.run(env={**kit.env, "OPENAI_API_KEY": secret})
    assert "Incorrect API key provided" in raised.value.message
    assert "WXYZ" not in raised.value.message and "sk-" not in raised.value.message


# ---- assembling chunks --------------------------------------------------------------------------------


def test_tool_call_fragments_are_joined_by_index_even_interleaved() -> None:
    answer = read_all(
        chunk(calls=[fragment(0, call_id="call_a", name="get_weather", arguments="")]),
        chunk(calls=[fragment(1, call_id="call_b", name="get_weather", arguments='{"ci')]),
        chunk(calls=[fragment(0, arguments='{"city": "Oslo"}')]),
        chunk(calls=[fragment(1, arguments='ty": "Rome"}')]),
        chunk(finish="tool_calls"),
    )
    calls = answer.response(sent={}, latency_ms=1).tool_calls
    assert [(c.id, c.args) for c in calls] == [("call_a", {"city": "Oslo"}), ("call_b", {"city": "Rome"})]


def test_a_server_reusing_an_index_for_a_new_call_id_gives_two_calls() -> None:
    answer = read_all(
        chunk(calls=[fragment(0, call_id="call_a", name="get_weather", arguments='{"city": "Oslo"}')]),
        chunk(calls=[fragment(0, call_id="call_b", name="get_weather", arguments='{"city": "Rome"}')]),
        chunk(finish="tool_calls"),
    )
    calls = answer.response(sent={}, latency_ms=1).tool_calls
    assert [c.id for c in calls] == ["call_a", "call_b"]


def test_a_call_without_an_id_gets_the_deterministic_id_of_its_step() -> None:
    answer = read_all(
        chunk(calls=[fragment(None, name="get_weather", arguments="{}")]), chunk(finish="tool_calls"),
    )
    assert answer.response(sent={}, latency_ms=1).tool_calls[0].id == scripted_call_id("step-9", 0)


def test_only_the_first_choice_is_the_answer_and_a_refusal_is_text() -> None:
    refusal = NS(choices=[NS(index=0, delta=NS(content=None, refusal="I can't.", tool_calls=None),
                             finish_reason="stop")], usage=None)
    answer = read_all(chunk(content="other", index=1), refusal)
    assert answer.response(sent={}, latency_ms=1).text == "I can't."


def test_usage_details_keep_cached_and_reasoning_tokens() -> None:
    usage = NS(prompt_tokens=100, completion_tokens=20,
               prompt_tokens_details=NS(cached_tokens=64), completion_tokens_details=NS(reasoning_tokens=5))
    answer = read_all(chunk(content="hi", finish="stop"), NS(choices=[], usage=usage))
    assert answer.usage == {"input_tokens": 100, "output_tokens": 20,
                            "cache_read_input_tokens": 64, "reasoning_tokens": 5}


# ---- the emulator refuses what OpenAI refuses ---------------------------------------------------------


ASSISTANT_CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]}


@pytest.mark.parametrize("messages, fragment_, param", [
    ([{"role": "user", "content": "q"}, ASSISTANT_CALL, {"role": "user", "content": "next"}],
     "did not have response messages: call_1", "messages.[1].role"),
    ([{"role": "user", "content": "q"}, ASSISTANT_CALL],
     "did not have response messages: call_1", "messages.[1].role"),
    ([{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "call_9", "content": "x"}],
     "must be a response to a preceeding message with 'tool_calls'", "messages.[1].role"),
    ([{"role": "user", "content": "q"}, ASSISTANT_CALL,
      {"role": "tool", "tool_call_id": "call_1", "content": "x"},
      {"role": "tool", "tool_call_id": "call_1", "content": "again"}],
     "must be a response to a preceeding message", "messages.[3].role"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": None}],
     "expected a string, got null", "messages.[1].content"),
    ([{"role": "robot", "content": "q"}], "Supported values are", "messages.[0].role"),
], ids=["call-then-user", "call-at-the-end", "result-without-call", "second-result", "null-content",
        "bad-role"])
def test_the_emulator_refuses_broken_pairs_like_openai(kit: Kit, messages, fragment_, param) -> None:
    response = post(kit.emulator, {"model": "m", "messages": messages, "stream": True})
    assert response.status_code == 400
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and fragment_ in error["message"]
    assert error["param"] == param


def test_the_emulator_refuses_a_context_too_long_with_its_code(kit: Kit) -> None:
    kit.emulator.max_context_tokens = 5
    response = post(kit.emulator, {"model": "m", "messages": [{"role": "user", "content": "x" * 100}]})
    error = response.json()["error"]
    assert response.status_code == 400 and error["code"] == "context_length_exceeded"
    assert "maximum context length is 5 tokens" in error["message"]
