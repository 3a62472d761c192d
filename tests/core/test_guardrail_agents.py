"""Guardrails that are agents, in the pure core: how settings name one, what its model is
sent, and how its answer is read as a verdict."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentq.core.guardrail_agents import (
    VERDICT_FORMAT,
    parse_verdict,
    verdict_request,
    verdict_settings,
)
from agentq.core.guardrails import MAX_INFO_CHARS, guardrail_key
from agentq.core.settings import parse_settings


def test_a_guardrail_names_a_function_or_an_agent_and_agent_colon_is_short_for_an_agent():
    settings = parse_settings({"input_guardrails": ["no_pii", "agent:judge",
                                                    {"agent": "j2", "parallel": True}]})
    refs = settings.input_guardrails
    assert [(r.name, r.agent, r.parallel) for r in refs] == [
        ("no_pii", None, False), (None, "judge", False), (None, "j2", True)]
    assert [r.label for r in refs] == ["no_pii", "agent:judge", "agent:j2"]
    assert settings.guardrail_agents() == ["judge", "j2"]


@pytest.mark.parametrize("ref", [{}, {"name": "f", "agent": "a"}, {"agent": "bad name"},
                                 "agent:", {"agent": "a", "extra": 1}])
def test_a_guardrail_that_names_neither_both_or_a_bad_agent_is_refused(ref):
    with pytest.raises(ValidationError):
        parse_settings({"output_guardrails": [ref]})


def test_a_tool_calls_guardrails_are_functions_only():
    with pytest.raises(ValidationError, match="a tool call's guardrails are functions"):
        parse_settings({"tool_output_guardrails": ["agent:judge"]})


def test_an_agents_verdict_has_a_step_key_of_its_own_apart_from_a_function_of_its_name():
    assert guardrail_key("c1", "input", "agent:judge", 3) != guardrail_key("c1", "input", "judge", 3)
    assert guardrail_key("c1", "input", "agent:judge", 3) == guardrail_key("c1", "input", "agent:judge", 3)


def test_the_verdict_call_answers_the_verdicts_format_with_no_tools():
    own = parse_settings({"system": "Stop card numbers.", "tools": ["lookup"],
                          "tool_choice": "required",
                          "response_format": {"schema": {"type": "object"}}})
    settings = verdict_settings(own)
    assert settings.response_format == VERDICT_FORMAT
    assert settings.tools is None and settings.tool_choice is None
    request = verdict_request(settings, "output", "Your card is 4111.")
    assert request.system.startswith("Stop card numbers.\n\nYou are a guardrail.")
    assert "an assistant's answer" in request.system
    assert [(m.role, m.text) for m in request.messages] == [("user", "Your card is 4111.")]


@pytest.mark.parametrize(("answer", "tripped", "info"), [
    ('{"tripped": true, "reason": "a card number"}', True, {"reason": "a card number"}),
    ('{"tripped": false, "reason": ""}', False, {"reason": ""}),
    ('{"tripped": false}', False, None),
])
def test_a_verdict_is_read_from_the_agents_json(answer, tripped, info):
    verdict = parse_verdict("agent:judge", "input", answer)
    assert (verdict.name, verdict.phase, verdict.tripped, verdict.info) == (
        "agent:judge", "input", tripped, info)


@pytest.mark.parametrize(("answer", "why"), [
    ("Looks fine.", "its answer is not JSON"),
    ('["tripped", false]', 'its answer has no boolean "tripped"'),
    ('{"tripped": "no"}', 'its answer has no boolean "tripped"'),
    ('{"reason": "fine"}', 'its answer has no boolean "tripped"'),
])
def test_an_answer_that_is_no_verdict_trips(answer, why):
    verdict = parse_verdict("agent:judge", "output", answer)
    assert verdict.tripped
    assert verdict.info == {"error": f"the guardrail agent answered no verdict: {why}",
                            "answer": answer}


def test_a_long_reason_is_cut_to_what_a_verdict_keeps():
    verdict = parse_verdict("agent:judge", "input",
                            '{"tripped": true, "reason": "' + "x" * (2 * MAX_INFO_CHARS) + '"}')
    assert verdict.tripped and len(verdict.info) == MAX_INFO_CHARS + 1
