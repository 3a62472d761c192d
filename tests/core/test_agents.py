"""Agent definitions as plain values: identity by content, references, overrides."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest
from pydantic import ValidationError

from agentq.core.agents import (
    MAX_DEFINITION_BYTES, AgentDefinition, AgentRef, AgentVersion, NotOverridable,
    parse_agent_ref, settings_with_overrides,
)

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def definition(**changes) -> AgentDefinition:
    body = {"name": "support", "settings": {"system": "Be kind.", "tools": ["lookup"],
                                            "limits": {"max_rounds_per_turn": 5}}}
    return AgentDefinition.model_validate({**body, **changes})


def version(**changes) -> AgentVersion:
    made = definition(**changes)
    return AgentVersion(definition=made, version=1, digest=made.digest, source="api", created_at=T0)


def test_the_same_definition_has_the_same_digest():
    assert definition().digest == definition().digest
    assert len(definition().digest) == 64


def test_any_change_to_the_definition_changes_its_digest():
    digests = {
        definition().digest,
        definition(description="Helps.").digest,
        definition(settings={"system": "Be brief.", "tools": ["lookup"]}).digest,
        definition(overridable=["system"]).digest,
        definition(name="billing").digest,
    }
    assert len(digests) == 5


def test_the_order_of_the_overridable_fields_does_not_change_the_digest():
    assert (definition(overridable=["system", "limits"]).digest
            == definition(overridable=["limits", "system", "limits"]).digest)


def test_defaults_the_definition_leaves_unset_are_not_part_of_its_content():
    assert definition().canonical()["settings"] == {
        "system": "Be kind.", "tools": ["lookup"], "limits": {"max_rounds_per_turn": 5}}


def test_overridable_names_only_fields_of_the_settings():
    with pytest.raises(ValidationError, match="overridable names settings fields"):
        definition(overridable=["system", "base_url"])


@pytest.mark.parametrize("name", ["", "a b", "../etc", "x" * 65, "support@3", "-lead", "ünï"])
def test_a_name_is_short_and_of_a_safe_alphabet(name):
    with pytest.raises(ValidationError):
        definition(name=name)


def test_a_definition_larger_than_the_limit_is_refused():
    big = definition(settings={"system": "x" * MAX_DEFINITION_BYTES})
    with pytest.raises(ValueError, match="at most"):
        big.checked_size()
    assert definition().checked_size() == definition()


def test_settings_an_agent_holds_are_checked_like_a_conversations():
    with pytest.raises(ValidationError):
        definition(settings={"api_key": "sk-abcdefghijklmnopqrstuvwxyz"})


@pytest.mark.parametrize("text, ref", [
    ("support", AgentRef("support", None)),
    ("support@3", AgentRef("support", 3)),
    ("billing.v2@12", AgentRef("billing.v2", 12)),
])
def test_a_reference_names_an_agent_and_maybe_its_version(text, ref):
    assert parse_agent_ref(text) == ref


@pytest.mark.parametrize("text", ["", "@3", "support@", "support@0", "support@x", "a b@1",
                                  "support@1@2", "support@9999999999"])
def test_a_malformed_reference_is_refused(text):
    with pytest.raises(ValueError):
        parse_agent_ref(text)


def test_overrides_of_allowed_fields_go_over_the_agents_settings_and_sections_merge():
    agent = version(overridable=["system", "limits"])
    settings = settings_with_overrides(agent, {"system": "Be brief.",
                                               "limits": {"tool_timeout_s": 5.0}})
    assert settings.system == "Be brief."
    assert (settings.limits.max_rounds_per_turn, settings.limits.tool_timeout_s) == (5, 5.0)
    assert settings.tools == ["lookup"]


def test_no_overrides_give_the_agents_settings():
    assert settings_with_overrides(version(), {}) == definition().settings


def test_an_override_of_a_field_the_agent_keeps_fixed_is_refused_naming_it():
    with pytest.raises(NotOverridable) as refused:
        settings_with_overrides(version(overridable=["system"]), {"system": "x", "tools": [],
                                                                  "provider": "openai"})
    assert refused.value.fields == ["profile", "tools"]
    assert "allows: system" in str(refused.value)


def test_overrides_that_break_the_agents_settings_are_refused():
    agent = version(overridable=["tool_choice"])
    with pytest.raises(ValidationError):
        settings_with_overrides(agent, {"tool_choice": {"name": "refund"}})
