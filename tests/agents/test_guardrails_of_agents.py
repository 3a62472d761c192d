"""Guardrails and instructions on agents: given in Python as functions, named through /v1/agents."""
from __future__ import annotations

import time

import pytest

import agentq
from agentq.agents import CodeAgents
from agentq.core.scope import SYSTEM_SCOPE
from agentq.tools import Registry
from agentq.tools.guardrails import GuardrailContext, Guardrails
from tests.support import guardrails_for_tests as checks
from tests.support.api import Api

REGISTRY_MODULES = ["tests.support.tools_for_tests", "tests.support.guardrails_for_tests"]
CTX = GuardrailContext("c1", "input", SYSTEM_SCOPE, None, "k1")


def test_an_agent_takes_guardrails_and_instructions_as_functions_and_keeps_their_names():
    defined = agentq.agent("careful", input_guardrails=[checks.no_secrets, checks.watchful],
                           output_guardrails=["polite_answer"], system=checks.for_the_user)
    settings = defined.definition.settings
    assert [(r.name, r.parallel) for r in settings.input_guardrails or ()] == [
        ("no_secrets", False), ("watchful", True)]
    assert [r.name for r in settings.output_guardrails or ()] == ["polite_answer"]
    assert (settings.instructions, settings.system) == ("for_the_user", "")
    assert defined.instructions is checks.for_the_user


def test_an_agent_given_as_a_guardrail_is_named_as_one_and_must_be_defined_in_code_too():
    judge = agentq.agent("judge", system="Trip on card numbers.")
    careful = agentq.agent("careful", input_guardrails=[checks.no_secrets, judge],
                           output_guardrails=["agent:judge"])
    settings = careful.definition.settings
    assert [r.label for r in settings.input_guardrails or ()] == ["no_secrets", "agent:judge"]
    assert settings.guardrail_agents() == ["judge"]
    CodeAgents([careful, judge]).check_tools(Registry.from_modules(REGISTRY_MODULES))
    with pytest.raises(ValueError, match="offers as guardrails agents no module defines: judge"):
        CodeAgents([careful]).check_tools(Registry.from_modules(REGISTRY_MODULES))


def test_a_plain_function_as_instructions_is_held_by_its_agent_and_found_with_it():
    def plainly(ctx):
        return "Be plain."

    defined = agentq.agent("plain", system=plainly)
    assert defined.definition.settings.instructions == "plainly"
    assert defined.instructions is not None and defined.instructions.fn is plainly


def test_a_plain_function_is_no_guardrail():
    with pytest.raises(TypeError, match="@agentq.guardrail"):
        agentq.agent("careless", input_guardrails=[lambda text: False])


def test_an_agent_naming_a_guardrail_no_module_registers_stops_the_process_at_start():
    agents = CodeAgents([agentq.agent("careful", input_guardrails=["nowhere"])])
    with pytest.raises(ValueError, match="guardrails no module registers: nowhere"):
        agents.check_tools(Registry.from_modules(REGISTRY_MODULES))


def test_a_guardrail_answering_a_bool_or_a_verdict_gives_its_verdict():
    guardrails = Guardrails([checks.no_secrets, agentq.guardrail(lambda text: True, name="always")])
    found = guardrails.run("no_secrets", "the secret", CTX)
    assert (found.tripped, found.info) == (True, {"matched": "secret"})
    assert guardrails.run("always", "x", CTX).tripped
    assert not guardrails.run("no_secrets", "hello", CTX).tripped


def test_a_guardrail_that_answers_nonsense_or_runs_out_of_time_trips():
    def slow(text):
        time.sleep(5)
        return False

    guardrails = Guardrails([agentq.guardrail(lambda text: "yes", name="vague"),
                             agentq.guardrail(slow, timeout_s=0.05)])
    assert guardrails.run("vague", "x", CTX).info == {
        "error": "guardrail answered a str, not a GuardrailVerdict or a bool"}
    assert guardrails.run("slow", "x", CTX).info == {"error": "timed out after 0.05s"}
    assert guardrails.run("unregistered", "x", CTX).tripped


def test_a_tenants_agent_names_the_operators_guardrails(api: Api, alice):
    settings = {"input_guardrails": ["no_secrets"], "output_guardrails": ["polite_answer"],
                "instructions": "for_the_user"}
    created = api.client.post("/v1/agents", json={"name": "careful", "settings": settings},
                              headers=alice)
    assert created.status_code == 201, created.json
    assert created.json["settings"]["input_guardrails"] == [{"name": "no_secrets"}]


@pytest.mark.parametrize("settings, code", [
    ({"input_guardrails": ["rm_rf"]}, "unknown_guardrail"),
    ({"output_guardrails": [{"name": "no_secrets", "parallel": True}]}, "conflicting_settings"),
    ({"instructions": "nowhere"}, "unknown_instructions"),
    ({"input_guardrails": [{"name": "no_secrets", "fn": "os.system"}]}, None),
])
def test_a_tenants_agent_naming_what_the_operator_does_not_offer_is_refused(
        api: Api, alice, settings, code):
    refused = api.client.post("/v1/agents", json={"name": "careless", "settings": settings},
                              headers=alice)
    assert refused.status_code == 422, refused.json
    if code is not None:
        assert refused.json["error"]["code"] == code
    assert api.client.get("/v1/agents/careless", headers=alice).status_code == 404
