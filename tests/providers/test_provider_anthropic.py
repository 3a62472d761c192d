"""The Anthropic adapter's own details, and the strictness of the Anthropic emulator.

What both adapters share (streaming, retries, cancellation, secrets, audit) is in
test_provider_contract.py.
"""
from __future__ import annotations

import threading
from types import SimpleNamespace as NS

import httpx2
import pytest

from agentq.core.render import render
from agentq.providers.anthropic import DEFAULT_MAX_TOKENS, EventReader
from agentq.providers.answer import Answer
from agentq.providers.errors import ProviderError
from agentq.runtime.model_call import ModelCall, RoundInfo
from agentq.runtime.timers import Timers
from tests.support.announce import recording, unheard
from tests.support.emulators import AnthropicEmulator, Fail, Reply
from tests.support.emulators.kit import HELLO, Kit, WEATHER, kit_fixtures
from tests.support.emulators.shapes import SHAPES


served, kit = kit_fixtures("anthropic")


def post(emulator: AnthropicEmulator, body: dict) -> httpx2.Response:
    headers = {"x-api-key": emulator.api_key, "anthropic-version": "2023-06-01"}
    return httpx2.post(emulator.base_url + "/v1/messages", json=body, headers=headers)


def user(*blocks) -> dict:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks) -> dict:
    return {"role": "assistant", "content": list(blocks)}


TEXT = {"type": "text", "text": "hello"}
USE = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}


# ---- the wire ---------------------------------------------------------------------------------------


def test_results_go_first_in_the_next_user_message_and_the_system_prompt_apart(kit: Kit) -> None:
    kit.answer(render(SHAPES["interrupted_with_open_calls"], [WEATHER]))
    body = kit.emulator.received[-1]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "assistant", "user"]
    follow_up = body["messages"][2]["content"]
    assert [b["type"] for b in follow_up] == ["tool_result", "tool_result"]
    assert follow_up[1]["is_error"] is True
    assert body["messages"][4]["content"] == [
        {"type": "text", "text": "q2", "cache_control": {"type": "ephemeral"}}]  # a cache breakpoint


def test_max_tokens_is_always_sent_from_settings_or_the_default(kit: Kit) -> None:
    kit.answer()
    kit.answer(settings=kit.settings(max_tokens=99))
    assert [body["max_tokens"] for body in kit.emulator.received] == [DEFAULT_MAX_TOKENS, 99]


def test_the_system_prompt_is_the_top_level_system_field(kit: Kit) -> None:
    kit.answer()
    body = kit.emulator.received[-1]
    assert body["system"] == [{"type": "text", "text": HELLO.system, "cache_control": {"type": "ephemeral"}}]
    assert all(m["role"] != "system" for m in body["messages"])


def test_a_spend_limit_429_is_permanent(kit: Kit) -> None:
    kit.emulator.then(Fail(429, "spend limit reached", code="enforced_spend_limit_reached"))
    call = ModelCall(kit.provider(), unheard(), lambda step_key: None, timers=Timers(), max_attempts=3,
                     sleep=lambda s: None)
    with pytest.raises(ProviderError) as raised:
        call.run(HELLO, kit.ctx(), RoundInfo("c", None, "r", "s"), threading.Event(), timeout_s=30)
    assert raised.value.code == "enforced_spend_limit_reached" and not raised.value.transient
    assert len(kit.emulator.received) == 1


def test_a_529_overloaded_is_retried_and_says_so(kit: Kit) -> None:
    kit.emulator.then(Fail(529, "Overloaded"), Reply(text="back"))
    notices: list = []
    call = ModelCall(kit.provider(), recording(notices), lambda step_key: None,
                     timers=Timers(), max_attempts=3, sleep=lambda s: None)
    response = call.run(HELLO, kit.ctx(), RoundInfo("c", None, "r", "s"), threading.Event(), timeout_s=30)
    assert response.text == "back" and "overloaded_error" in notices[0][1]["error"]


# ---- assembling events --------------------------------------------------------------------------------


def test_a_tool_use_sent_whole_in_its_start_block_keeps_its_input() -> None:
    answer, reader = Answer("step-1"), EventReader()
    block = NS(type="tool_use", id="toolu_x", name="get_weather", input={"city": "Oslo"})
    for event in (NS(type="content_block_start", index=0, content_block=block),
                  NS(type="message_delta", delta=NS(stop_reason="tool_use"), usage=NS(output_tokens=3)),
                  NS(type="message_stop")):
        reader.read(event, answer)
    response = answer.response(sent={}, latency_ms=1)
    assert response.tool_calls[0].args == {"city": "Oslo"} and response.finish_reason == "tool_calls"


def test_usage_merges_the_start_counts_with_the_final_output_count() -> None:
    answer, reader = Answer("step-1"), EventReader()
    start = NS(usage=NS(input_tokens=50, output_tokens=1, cache_read_input_tokens=40,
                        cache_creation_input_tokens=0))
    reader.read(NS(type="message_start", message=start), answer)
    end = NS(type="message_delta", delta=NS(stop_reason="end_turn"), usage=NS(output_tokens=12))
    reader.read(end, answer)
    assert answer.usage == {"input_tokens": 50, "output_tokens": 12, "cache_read_input_tokens": 40}


# ---- the emulator refuses what Anthropic refuses -------------------------------------------------------


@pytest.mark.parametrize("messages, fragment", [
    ([assistant(TEXT)], 'first message must use the "user" role'),
    ([user(TEXT), user(TEXT)], "roles must alternate"),
    ([user(TEXT), assistant(USE), user(TEXT)], "`tool_use` ids were found without `tool_result` blocks"),
    ([user(TEXT), assistant(USE)], "`tool_use` ids were found without `tool_result` blocks"),
    ([user(RESULT)], "unexpected `tool_use_id` found in `tool_result` blocks"),
    ([user(TEXT), assistant(USE), user(TEXT, RESULT)], "tool_result blocks must come first"),
    ([user(TEXT), assistant(USE), user(RESULT, RESULT)], "each tool_use must have a single result"),
    ([user(TEXT), assistant(USE), user(RESULT), assistant(USE), user(RESULT)], "ids must be unique"),
    ([user({"type": "text", "text": "  "})], "non-whitespace text"),
    ([user(TEXT), assistant({"type": "text", "text": "trailing "})], "cannot end with trailing whitespace"),
    ([user(USE)], "does not match any of the expected tags"),
], ids=["assistant-first", "two-users", "use-then-text", "use-at-the-end", "result-without-use",
        "result-after-text", "two-results", "reused-id", "blank-text", "trailing-space", "use-in-user"])
def test_the_emulator_refuses_what_anthropic_refuses(kit: Kit, messages, fragment) -> None:
    response = post(kit.emulator, {"model": "m", "max_tokens": 10, "messages": messages})
    assert response.status_code == 400
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert fragment in body["error"]["message"]


def test_the_emulator_requires_max_tokens(kit: Kit) -> None:
    response = post(kit.emulator, {"model": "m", "messages": [user(TEXT)]})
    assert response.status_code == 400 and "max_tokens" in response.json()["error"]["message"]


def test_the_emulator_says_prompt_is_too_long_in_anthropic_words(kit: Kit) -> None:
    kit.emulator.max_context_tokens = 5
    response = post(kit.emulator, {"model": "m", "max_tokens": 10, "messages": [user(TEXT, TEXT, TEXT)]})
    message = response.json()["error"]["message"]
    assert response.status_code == 400 and message.startswith("prompt is too long: ")
    assert message.endswith("tokens > 5 maximum")
