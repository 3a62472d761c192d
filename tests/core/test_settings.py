"""Conversation settings: provider options, and never an API key in clear."""
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
    {"base_url": f"https://user:{KEY}@llm.example.com/v1"},
    {"base_url": f"https://llm.example.com/v1?api-key={KEY}"},
], ids=["api_key", "apiKey", "in-extra-body", "as-a-header", "key-shaped-value", "url-userinfo", "url-query"])
def test_settings_refuse_a_key_in_clear_and_point_to_api_key_ref(data: dict) -> None:
    with pytest.raises(ValidationError) as raised:
        parse_settings(data)
    assert "api_key_ref" in str(raised.value) and KEY not in str(raised.value)


def test_api_key_ref_is_a_variable_name_never_the_key() -> None:
    with pytest.raises(ValidationError) as raised:
        parse_settings({"api_key_ref": KEY})
    assert "name of an environment variable" in str(raised.value) and KEY not in str(raised.value)


def test_settings_stored_before_the_provider_options_still_parse() -> None:
    old = {"provider": "scripted", "model": "scripted", "system": "", "tools": None, "script": None,
           "limits": {"max_rounds_per_turn": 25, "tool_timeout_s": 60.0, "llm_timeout_s": 300.0}}
    settings = parse_settings(old)
    assert settings.api_key_ref is None and settings.limits.read_timeout_s is None
