"""The pure rules of sub-agents: the child's id, what it is asked, the ceilings, its answer."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

import agentq
from agentq.agents import CodeAgents
from agentq.core.decide import AwaitInput, decide
from agentq.core.fsm import fold
from agentq.core.settings import Settings
from agentq.core.subagents import (
    AgentTool,
    answer,
    child_conversation_id,
    child_input,
    nth_agent_call,
    refusal,
)
from tests.core import builders as b


def test_a_childs_id_is_derived_from_its_parent_and_call_alone():
    assert child_conversation_id("p1", "call_1") == child_conversation_id("p1", "call_1")
    assert len({child_conversation_id("p1", "call_1"), child_conversation_id("p1", "call_2"),
                child_conversation_id("p2", "call_1")}) == 3


def test_the_default_schema_asks_the_child_its_input_and_refuses_anything_else():
    plain = AgentTool(name="researcher")
    assert plain.spec().parameters["required"] == ["input"]
    assert child_input(plain, {"input": "weather?"}) == "weather?"
    assert child_input(plain, {"input": 3}) is None
    assert child_input(plain, {"input": "a", "more": 1}) is None


def test_an_own_schema_asks_the_child_the_arguments_as_json():
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    tool = AgentTool(name="weather", description="Weather.", input_schema=schema)
    assert tool.spec().parameters == schema and tool.spec().description == "Weather."
    assert child_input(tool, {"city": "Oslo"}) == '{"city": "Oslo"}'


def test_the_ceilings_refuse_a_child_too_deep_or_one_too_many():
    ok = {"max_depth": 2, "max_children": 2}
    assert refusal(depth=1, nth_child=2, **ok) is None
    assert "max_agent_depth" in refusal(depth=2, nth_child=1, **ok)
    assert "max_children_per_turn" in refusal(depth=0, nth_child=3, **ok)


def test_a_calls_place_among_the_turns_agent_calls_counts_agent_calls_only():
    events = b.log(b.user("go"), b.assistant(), b.call("c1", executor="agent"),
                   b.call("t1"), b.call("c2", executor="agent"))
    assert nth_agent_call(events, "c1") == 1 and nth_agent_call(events, "c2") == 2


def test_an_agent_call_waits_like_a_pending_call_and_holds_no_worker():
    events = b.log(b.user("go"), b.assistant(), b.call("c1", executor="agent"))
    assert fold(events).state == "awaiting_input"
    decision = decide(b.view(events))
    assert isinstance(decision, AwaitInput) and decision.pending == ("c1",)


def test_the_childs_answer_is_its_last_text_or_json_or_why_it_failed():
    done = b.log(b.user("q"), b.assistant("thinking", round="r1"), b.assistant('{"a": 1}', round="r2"))
    assert answer(done, structured=False) == ("ok", '{"a": 1}')
    assert answer(done, structured=True) == ("ok", {"a": 1})
    failed = b.log(b.user("q"), b.error("rate_limited"))
    status, output = answer(failed, structured=False)
    assert status == "error" and "rate_limited" in output
    cut = b.log(b.user("q"), b.assistant("half", interrupted=True))
    assert answer(cut, structured=False)[0] == "error"


def test_settings_name_an_agent_tool_by_its_name_alone_and_once():
    settings = Settings.model_validate({"agents": ["researcher"], "tools": ["lookup"]})
    assert settings.agents == [AgentTool(name="researcher")]
    with pytest.raises(ValidationError):
        Settings.model_validate({"agents": ["lookup"], "tools": ["lookup"]})


def test_a_code_agent_offering_an_agent_no_module_defines_fails_at_start():
    lead = agentq.agent("lead", agents=["nobody"])
    with pytest.raises(ValueError, match="nobody"):
        CodeAgents([lead]).check_tools(agentq.tools.Registry([]))
    helper = agentq.agent("helper", description="Helps.")
    CodeAgents([agentq.agent("lead", agents=[helper]), helper]).check_tools(agentq.tools.Registry([]))
