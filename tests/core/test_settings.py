"""Conversation settings: a profile and a model, provider options, strict numbers, and never an
API key or an endpoint."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentq.core.settings import parse_settings

KEY = "sk-ant-api03-0123456789abcdefghijklmnop"


@pytest.mark.parametrize("data", [
    {"api_key": KEY},
    {"provider": "openai", "apiKey": KEY},
    {"extra_body": {"api_key": KEY}},
    {"extra_body": {"headers": {"Authorization": f"Bearer {KEY}"}}},
    {"extra_body": {"anything": KEY}},
], ids=["api_key", "apiKey", "in-extra-body", "as-a-header", "key-shaped-value"])
def test_settings_refuse_a_key_and_point_to_the_own_key_api(data: dict) -> None:
    with pytest.raises(ValidationError) as raised:
        parse_settings(data)
    assert "/v1/profiles/{profile}/key" in str(raised.value) and KEY not in str(raised.value)


@pytest.mark.parametrize("name, value", [
    ("base_url", "http://169.254.169.254/latest/meta-data/"),
    ("base_url", f"https://user:{KEY}@llm.example.com/v1"),
    ("api_key_ref", "AGENTQ_DATABASE_URL"),
    ("api_key_ref", KEY),
])
def test_settings_name_no_endpoint_and_no_key_variable(name: str, value: str) -> None:
    with pytest.raises(ValidationError) as raised:
        parse_settings({"provider": "openai", name: value})
    text = str(raised.value)
    assert f"{name} is no longer a conversation setting" in text and "profile" in text
    assert value not in text


def test_settings_stored_before_profiles_read_their_provider_as_the_profile() -> None:
    old = {"provider": "anthropic", "model": "claude-x", "system": "", "tools": None, "script": None,
           "limits": {"max_rounds_per_turn": 25, "tool_timeout_s": 60.0, "llm_timeout_s": 300.0}}
    settings = parse_settings(old)
    assert settings.profile == "anthropic" and settings.limits.read_timeout_s is None
    assert "provider" not in settings.model_dump() and settings.model_dump()["profile"] == "anthropic"


@pytest.mark.parametrize("data", [
    {"limits": {"max_rounds_per_turn": True}},
    {"limits": {"max_rounds_per_turn": "5"}},
    {"limits": {"max_rounds_per_turn": 5.5}},
    {"limits": {"llm_timeout_s": "30"}},
    {"script_repeat": 1},
    {"max_tokens": False},
    {"script": [{"chunks": "3"}]},
], ids=["bool-as-int", "text-as-int", "float-as-int", "text-as-float", "int-as-bool",
        "bool-as-int-top", "text-in-script"])
def test_numbers_and_booleans_in_settings_are_what_they_say(data: dict) -> None:
    with pytest.raises(ValidationError):
        parse_settings(data)


def test_an_integer_is_a_fine_number_of_seconds_and_a_whole_float_a_fine_integer() -> None:
    settings = parse_settings({"limits": {"llm_timeout_s": 30, "max_rounds_per_turn": 5.0}})
    assert settings.limits.llm_timeout_s == 30.0 and settings.limits.max_rounds_per_turn == 5


@pytest.mark.parametrize("model", ["gpt 4", "../../admin", "", "m" * 201, "a\nb"])
def test_a_model_name_is_a_plain_name(model: str) -> None:
    with pytest.raises(ValidationError):
        parse_settings({"provider": "openai", "model": model})
