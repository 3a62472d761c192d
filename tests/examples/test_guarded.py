"""examples/guarded: its agent's guardrails, instructions and handoff to billing, run by the
runtime on SQLite."""
from __future__ import annotations

import pytest

from agentq.agents import CodeAgents
from agentq.agents.catalog import Catalog
from agentq.commands import Commands
from agentq.config import Config
from agentq.core.guardrails import GUARDRAIL_TRIPPED
from agentq.core.scope import Scope
from agentq.runtime import Runtime
from agentq.tools import Registry
from tests.support.clock import Clock
from tests.support.drive import Recorder, drain
from tests.support.processes import ROOT
from tests.support.rules import Rules

ADA = Scope(tenant="shop", user="ada")
TO_BILLING = [{"tool_calls": [{"name": "transfer_to_billing",
                               "args": {"reason": "a refund question"}}]}]


@pytest.fixture
def example(sqlite_store, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "guarded"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    registry = Registry.from_modules(["guarded_agent"])
    agents = CodeAgents.from_modules(["guarded_agent"], registry)
    runtime = Runtime(store=sqlite_store, registry=registry, pubsub=Recorder(), config=Config(),
                      rules=Rules(), sleep=lambda s: None)
    catalog = Catalog.published(sqlite_store, lambda name, tenant: True, agents, now=Clock()())
    return runtime, Commands(sqlite_store, registry, catalog=catalog)


def turn(example, text: str, **changes):
    """A new conversation started from the example's agent, and its first turn."""
    runtime, commands = example
    conv = commands.create_conversation(ADA, changes, agent="guarded_support")
    return next_turn(example, conv.id, text)


def next_turn(example, conversation_id: str, text: str):
    runtime, commands = example
    drain(runtime, commands.post_message(conversation_id, text, ADA)[1])
    return runtime.store.log.list_events(conversation_id)


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


def test_a_refund_question_is_handed_to_billing_which_looks_it_up_and_answers(example):
    events = turn(example, "was my refund for order 1001 paid?", script=TO_BILLING)
    (handoff,) = [e.content for e in events if e.type == "handoff"]
    assert (handoff["from"], handoff["to"], handoff["why"]) == (
        "guarded_support", "billing", "a refund question")
    (lookup,) = [e.content for e in events if e.type == "tool_result"
                 and e.content["tool_call_id"] != handoff["tool_call_id"]]
    assert lookup["output"] == {"status": "paid", "amount": 89.0, "paid_on": "2026-11-20"}
    assert events[-1].content["text"] == "Your refund of 89.00 for order 1001 was paid on 2026-11-20."
    told = [e.content["instructions"] for e in events if e.type == "assistant_msg"]
    assert [i["name"] for i in told] == ["support_instructions", "billing_instructions",
                                         "billing_instructions"]
    assert "support agent of shop's shop, talking to ada" in told[0]["text"]
    assert "billing desk of shop's shop, talking to ada" in told[1]["text"]
    assert "text" not in told[2]  # unchanged since billing's first answer: its digest only


def test_the_next_turn_goes_to_billing_which_holds_the_conversation(example):
    first = turn(example, "was my refund paid?", script=TO_BILLING)
    events = next_turn(example, first[0].conversation_id, "and when exactly?")
    later = events[len(first):]
    assert not any(e.type == "handoff" for e in later)
    verdicts = [e.content["name"] for e in later if e.type == "guardrail"]
    assert verdicts == ["no_card_numbers"]  # billing's own input guardrail, not support's two
    assert [e.content["name"] for e in later if e.type == "tool_call"] == ["refund_status"]
    assert later[-1].content["text"].startswith("Your refund of 89.00")
    runtime = example[0]
    assert runtime.store.conversations.load(first[0].conversation_id).fsm.agent["name"] == "billing"


def test_a_card_number_sent_to_billing_is_stopped_by_billings_own_guardrail(example):
    first = turn(example, "was my refund paid?", script=TO_BILLING)
    events = next_turn(example, first[0].conversation_id, "charge 4111 1111 1111 1111 instead")
    assert [e.type for e in events[len(first):]] == ["user_msg", "guardrail", "error"]
    assert events[-1].content["details"]["guardrail"] == "no_card_numbers"
