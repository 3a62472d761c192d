"""examples/guarded: its agent's guardrails and instructions, run by the runtime on SQLite."""
from __future__ import annotations

import pytest

from agentq.agents import CodeAgents
from agentq.commands import Commands
from agentq.config import Config
from agentq.core.guardrails import GUARDRAIL_TRIPPED
from agentq.core.scope import Scope
from agentq.runtime import Runtime
from agentq.tools import Registry
from tests.support.drive import Recorder, drain
from tests.support.processes import ROOT
from tests.support.rules import Rules

ADA = Scope(tenant="shop", user="ada")


@pytest.fixture
def example(sqlite_store, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "guarded"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    registry = Registry.from_modules(["guarded_agent"])
    agents = CodeAgents.from_modules(["guarded_agent"], registry)
    runtime = Runtime(store=sqlite_store, registry=registry, pubsub=Recorder(), config=Config(),
                      rules=Rules(), sleep=lambda s: None)
    settings = agents.get("guarded_support").definition.settings
    return runtime, Commands(sqlite_store, registry), settings.model_dump(mode="json", exclude_unset=True)


def turn(example, text: str, **changes):
    runtime, commands, settings = example
    conv = commands.create_conversation(ADA, {**settings, **changes})
    drain(runtime, commands.post_message(conv.id, text, ADA)[1])
    return runtime.store.log.list_events(conv.id)


def test_a_card_number_stops_the_turn_before_the_model_is_called(example):
    events = turn(example, "my card is 4111 1111 1111 1111, refund me")
    assert [e.type for e in events] == ["user_msg", "guardrail", "error"]
    assert events[-1].content["details"] == {"guardrail": "no_card_numbers", "phase": "input",
                                             "info": {"pii": "card"}}


def test_a_clean_message_is_answered_with_instructions_written_for_the_user(example):
    events = turn(example, "where is my order?")
    verdicts = [(e.content["name"], e.content["tripped"]) for e in events if e.type == "guardrail"]
    assert verdicts == [("no_card_numbers", False), ("no_jailbreak", False), ("on_topic", False)]
    assert events[-1].type == "assistant_msg"
    answer = events[-1].content
    assert answer["text"] == "Your order ships tomorrow."
    assert "talking to ada" in answer["instructions"]["text"]


def test_an_answer_naming_a_competitor_fails_its_turn(example):
    events = turn(example, "where else can I buy?", script=[{"text": "Try MegaStore."}])
    assert events[-1].content["code"] == GUARDRAIL_TRIPPED
    assert events[-1].content["details"]["guardrail"] == "on_topic"
    assert not any("MegaStore" in str(e.content) for e in events)
