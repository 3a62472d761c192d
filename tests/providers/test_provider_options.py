"""Declared request options against the strict emulators: OpenAI reasoning models,
`tool_choice` and structured output (`response_format`), in each API's own words.

The rules the emulators enforce are named in tests/support/emulators/openai_options.py and
tests/support/emulators/anthropic_options.py.
"""
from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator

import httpx2
import pytest

from agentq.core.settings import parse_settings
from agentq.providers.errors import ProviderError
from agentq.providers.openai_chat import reasoning_model
from tests.support.emulators import Reply
from tests.support.emulators.kit import HELLO, Kit, kit_fixtures, running

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
          "additionalProperties": False}


served, kit = kit_fixtures("openai", "anthropic")


@pytest.fixture(scope="module")
def openai_kit() -> Iterator[Kit]:
    with running("openai") as emulator:
        yield Kit("openai", emulator)


def _post_openai(kit: Kit, body: dict) -> httpx2.Response:
    headers = {"authorization": f"Bearer {kit.emulator.api_key}"}
    return httpx2.post(kit.emulator.base_url + "/chat/completions", json=body, headers=headers)


# ---- OpenAI reasoning models ------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["o1", "o3-mini", "o4-mini", "gpt-5", "gpt-5-mini", "openai/gpt-5"])
def test_o_series_and_gpt5_are_reasoning_models(model):
    assert reasoning_model(model)


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4.1-mini", "emu-model-1", "omni-x"])
def test_other_models_are_not(model):
    assert not reasoning_model(model)


def test_a_reasoning_model_gets_max_completion_tokens_no_sampling_and_its_effort(openai_kit: Kit):
    openai_kit.emulator.clear()
    settings = openai_kit.settings(model="o3-mini", max_tokens=300, temperature=0.2,
                                   reasoning_effort="high", extra_body={"top_p": 0.5})
    openai_kit.answer(dataclasses.replace(HELLO, model="o3-mini"), settings=settings,
                      profile={"extra_body": ("top_p",)})
    body = openai_kit.emulator.received[-1]
    assert not openai_kit.emulator.refused
    assert body["max_completion_tokens"] == 300 and body["reasoning_effort"] == "high"
    assert not {"max_tokens", "temperature", "top_p"} & set(body)


def test_an_older_model_keeps_max_tokens_and_temperature_and_gets_no_effort(openai_kit: Kit):
    openai_kit.emulator.clear()
    settings = openai_kit.settings(max_tokens=300, temperature=0.2, reasoning_effort="low")
    openai_kit.answer(settings=settings)
    body = openai_kit.emulator.received[-1]
    assert (body["max_tokens"], body["temperature"]) == (300, 0.2) and "reasoning_effort" not in body


@pytest.mark.parametrize("extra, fragment", [
    ({"max_tokens": 10}, "Use 'max_completion_tokens' instead"),
    ({"temperature": 0.2}, "Only the default (1) value is supported"),
    ({"model": "gpt-4o", "reasoning_effort": "low"}, "'reasoning_effort' is not supported"),
], ids=["max_tokens", "temperature", "effort-on-gpt-4o"])
def test_the_emulator_refuses_what_a_reasoning_model_refuses(openai_kit: Kit, extra, fragment):
    body = {"model": "o3-mini", "messages": [{"role": "user", "content": "hi"}], **extra}
    response = _post_openai(openai_kit, body)
    assert response.status_code == 400 and fragment in response.json()["error"]["message"]


# ---- tool_choice and structured output, both APIs ---------------------------------------------------


def test_a_named_tool_choice_is_sent_in_each_apis_words(kit: Kit):
    kit.answer(settings=kit.settings(tool_choice={"name": "get_weather"}))
    choice = kit.emulator.received[-1]["tool_choice"]
    assert not kit.emulator.refused
    assert choice == ({"type": "function", "function": {"name": "get_weather"}} if kit.name == "openai"
                      else {"type": "tool", "name": "get_weather"})


def test_required_means_some_tool_in_each_api(kit: Kit):
    kit.answer(settings=kit.settings(tool_choice="required"))
    choice = kit.emulator.received[-1]["tool_choice"]
    assert choice == ("required" if kit.name == "openai" else {"type": "any"})


def test_structured_output_sends_the_schema_and_the_answer_is_its_json(kit: Kit):
    kit.emulator.then(Reply(text='{"city": "Oslo"}'))
    response = kit.answer(settings=kit.settings(response_format={"name": "place", "schema": SCHEMA}))
    body = kit.emulator.received[-1]
    assert not kit.emulator.refused and response.text == '{"city": "Oslo"}'
    if kit.name == "openai":
        assert body["response_format"] == {"type": "json_schema", "json_schema": {
            "name": "place", "schema": SCHEMA, "strict": True}}
    else:
        assert body["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}


def test_a_summary_call_gets_neither_tool_choice_nor_response_format(kit: Kit):
    settings = kit.settings(tool_choice="required", response_format={"schema": SCHEMA})
    request = dataclasses.replace(HELLO, tools=())
    items = list(kit.provider().stream(request, dataclasses.replace(kit.ctx(settings), purpose="summary"),
                                       threading.Event()))
    body = kit.emulator.received[-1]
    assert items and not {"tool_choice", "response_format", "output_config"} & set(body)


def test_a_named_tool_the_request_does_not_offer_fails_for_good_before_any_call(kit: Kit):
    with pytest.raises(ProviderError) as raised:
        kit.answer(settings=kit.settings(tool_choice={"name": "send_email"}))
    assert raised.value.code == "invalid_tool_choice" and not raised.value.transient
    assert kit.emulator.received == []


@pytest.mark.parametrize("settings, fragment", [
    ({"tool_choice": {"name": "x"}, "tools": ["get_weather"]}, "not in tools"),
    ({"tool_choice": "required", "thinking": {"budget_tokens": 2048}}, "forces a tool call"),
    ({"tool_choice": "sometimes"}, "tool_choice"),
    ({"response_format": {"schema": {"type": "array"}}}, "of type object"),
    ({"response_format": {"name": "bad name", "schema": SCHEMA}}, "name"),
    ({"reasoning_effort": "max"}, "reasoning_effort"),
])
def test_bad_options_are_refused_when_the_conversation_is_created(settings, fragment):
    with pytest.raises(ValueError, match=fragment):
        parse_settings(settings)


def test_stored_options_read_back_the_same():
    settings = parse_settings({"tool_choice": {"name": "get_weather"},
                               "response_format": {"schema": SCHEMA}, "reasoning_effort": "low"})
    stored = settings.model_dump(mode="json")
    assert stored["response_format"]["schema"] == SCHEMA
    assert parse_settings(stored) == settings


def test_one_tool_call_at_a_time_is_asked_in_each_apis_words(kit: Kit):
    kit.answer(settings=kit.settings(parallel_tool_calls=False))
    body = kit.emulator.received[-1]
    assert not kit.emulator.refused
    if kit.name == "openai":
        assert body["parallel_tool_calls"] is False
    else:
        assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}


def test_parallel_tool_calls_unset_sends_nothing(kit: Kit):
    kit.answer(settings=kit.settings())
    body = kit.emulator.received[-1]
    assert "parallel_tool_calls" not in body and "tool_choice" not in body
