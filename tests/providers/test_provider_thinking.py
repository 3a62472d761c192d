"""Thinking and reasoning items: kept verbatim in the log, sent back only to their own API.

The Anthropic emulator enforces the documented extended-thinking rules (named in
tests/support/emulators/anthropic_thinking.py): with thinking on, the tool-use round being answered
must open with its thinking block, signatures must be the ones the API issued, and
temperature must not be sent.
"""
from __future__ import annotations


import pytest

from agentq.commands import Commands
from agentq.config import Config
from agentq.core.reasoning import Reasoning, interleave
from agentq.core.request import CallRef, Message, Request
from agentq.core.wire import to_anthropic, to_openai
from agentq.live.pubsub import PubSub
from agentq.runtime import Runtime
from agentq.tools import Registry
from agentq.core.scope import Scope
from tests.support.drive import drain
from tests.support.emulators import Call, Reply
from tests.support.emulators import anthropic_thinking as rules
from tests.support.emulators.kit import Kit, MODEL, WEATHER, kit_fixtures
from tests.support.rules import Rules

SCOPE = Scope(tenant="t1", user="u1")
THINKING = {"thinking": {"budget_tokens": 2048}}


served, kit = kit_fixtures("anthropic")


def _turn(kit: Kit, store, *replies: Reply, **settings) -> str:
    kit.emulator.then(*replies)
    registry = Registry.from_modules(["agentq.tools.demo"])
    runtime = Runtime(store=store, registry=registry, pubsub=PubSub("embedded://thinking-tests"),
                      config=Config(), rules=Rules(providers=kit.access().provider_for), sleep=lambda s: None)
    commands = Commands(store, registry, policy=kit.policy())
    conversation = commands.create_conversation(SCOPE, kit.settings(tools=["get_weather"], **settings))
    _, follow = commands.post_message(conversation.id, "Weather in Oslo and Bergen?", SCOPE)
    drain(runtime, follow)
    return conversation.id


def test_thinking_blocks_go_back_first_and_verbatim_in_every_round_of_a_tool_turn(kit: Kit, sqlite_store):
    oslo, bergen = Call("get_weather", {"city": "Oslo"}), Call("get_weather", {"city": "Bergen"})
    cid = _turn(kit, sqlite_store,
                Reply(text="", thinking="Two cities: call both.", redacted=True, calls=(oslo, bergen)),
                Reply(text="One more.", calls=(Call("get_weather", {"city": "Tromsø"}),)),
                Reply(text="Cold everywhere."), temperature=0.3, **THINKING)
    assert not kit.emulator.refused, kit.emulator.refused
    assert len(kit.emulator.received) == 3
    events = sqlite_store.log.list_events(cid)
    stored = [e.content.get("reasoning") for e in events if e.type == "assistant_msg"]
    issued = stored[0]
    assert [entry["item"]["type"] for entry in issued] == ["thinking", "redacted_thinking"]
    assert issued[0] == {"provider": "anthropic", "index": 0, "item": {
        "type": "thinking", "thinking": "Two cities: call both.",
        "signature": rules.signature("Two cities: call both.")}}
    assert stored[1:] == [None, None]  # no thinking after tool results (not interleaved)
    for body in kit.emulator.received[1:]:
        first_reply = body["messages"][1]["content"]
        assert first_reply[:2] == [entry["item"] for entry in issued]
        assert [b["type"] for b in first_reply[2:]] == ["tool_use", "tool_use"]
        assert "temperature" not in body and body["thinking"]["budget_tokens"] == 2048
        assert body["max_tokens"] > 2048
    assert events[-1].content["text"] == "Cold everywhere."


def test_the_emulator_refuses_a_tool_round_without_its_thinking_block(kit: Kit):
    request = Request("", (Message("user", "Weather?"),
                           Message("assistant", "", tool_calls=(CallRef("toolu_1", "get_weather", {}),)),
                           Message("tool", "sunny", tool_call_id="toolu_1")), (WEATHER,), MODEL)
    with pytest.raises(Exception, match="Expected `thinking` or `redacted_thinking`, but found `tool_use`"):
        kit.answer(request, settings=kit.settings(**THINKING))


def test_the_emulator_refuses_a_thinking_block_whose_signature_it_did_not_issue(kit: Kit):
    forged = Reasoning("anthropic", {"type": "thinking", "thinking": "edited", "signature":
                                     rules.signature("original")}, 0)
    request = Request("", (Message("user", "Weather?"),
                           Message("assistant", "", tool_calls=(CallRef("toolu_1", "get_weather", {}),),
                                   reasoning=(forged,)),
                           Message("tool", "sunny", tool_call_id="toolu_1")), (WEATHER,), MODEL)
    with pytest.raises(Exception, match="Invalid `signature` in `thinking` block"):
        kit.answer(request, settings=kit.settings(**THINKING))


def test_thinking_is_not_answer_text_and_comes_back_as_a_reasoning_item(kit: Kit):
    kit.emulator.then(Reply(text="Sunny.", thinking="Oslo first.",
                            calls=(Call("get_weather", {"city": "Oslo"}),)))
    response = kit.answer(settings=kit.settings(**THINKING))
    assert response.text == "Sunny." and response.tool_calls[0].args == {"city": "Oslo"}
    assert [(r.provider, r.index, r.item["thinking"]) for r in response.reasoning] == [
        ("anthropic", 0, "Oslo first.")]


def test_reasoning_goes_back_only_to_the_kind_that_returned_it():
    mine = Reasoning("anthropic", {"type": "thinking", "thinking": "t", "signature": "s"}, 0)
    theirs = Reasoning("openai-responses", {"type": "reasoning", "id": "rs_1"}, 0)
    message = Message("assistant", "Hi.", tool_calls=(CallRef("c1", "get_weather", {}),),
                      reasoning=(theirs, mine))
    request = Request("", (Message("user", "q"), message, Message("tool", "ok", tool_call_id="c1")),
                      (WEATHER,), MODEL)
    blocks = to_anthropic(request)["messages"][1]["content"]
    assert [b["type"] for b in blocks] == ["thinking", "text", "tool_use"]
    assert "reasoning" not in str(to_openai(request)) and "thinking" not in str(to_openai(request))


def test_interleaved_reasoning_keeps_its_place_among_the_blocks():
    a, b_ = {"type": "tool_use", "id": "a"}, {"type": "tool_use", "id": "b"}
    first = Reasoning("anthropic", {"type": "thinking", "n": 1}, 0)
    second = Reasoning("anthropic", {"type": "thinking", "n": 2}, 2)
    placed = interleave([a, b_], [second, first])
    assert placed == [first.item, a, second.item, b_]


def test_thinking_needs_max_tokens_above_its_budget(kit: Kit):
    with pytest.raises(ValueError, match="max_tokens must be greater than thinking.budget_tokens"):
        kit.settings(max_tokens=2000, **THINKING)
    with pytest.raises(ValueError):
        kit.settings(thinking={"budget_tokens": 100})
