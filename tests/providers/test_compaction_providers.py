"""Compaction against the strict emulators: summaries are accepted, and size never fails a turn.

Before, the summary request carried the tool history as tool_use/tool_result blocks with
no `tools`, which Anthropic refuses (the compact step, and the conversation, failed for
good); and a context over the provider's limit failed the turn whenever the cut had to
keep `min_keep_turns` or the summary request was itself too long.
"""
from __future__ import annotations

from typing import Any

import pytest

from agentq.commands import Commands
from agentq.config import Config
from agentq.live.pubsub import PubSub
from agentq.runtime import Runtime
from agentq.tools import Registry
from agentq.core.scope import Scope
from tests.support.drive import drain
from tests.support.emulators import ByRequest, Call, Reply, anthropic_api
from tests.support.emulators.kit import Kit, kit_fixtures
from tests.support.rules import Rules

SCOPE = Scope(tenant="t1", user="u1")
TOOLS = ["agentq.tools.demo", "tests.support.tools_for_tests"]


served, kit = kit_fixtures("openai", "anthropic")


def test_anthropic_refuses_tool_blocks_in_a_request_that_defines_no_tools():
    """The documented rule the emulator keeps: tool history needs a `tools` definition."""
    body = {"model": "m", "max_tokens": 10, "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "w", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "9C"}]},
    ]}
    headers = {"anthropic-version": "2023-06-01"}
    assert anthropic_api.check(body, headers, 10**6) == anthropic_api.TOOLS_REQUIRED
    tools = [{"name": "w", "input_schema": {"type": "object"}}]
    assert anthropic_api.check({**body, "tools": tools}, headers, 10**6) is None


def _summary_request(body: dict[str, Any]) -> bool:
    return "tools" not in body


def _after_results(body: dict[str, Any]) -> bool:
    last = body["messages"][-1]
    if last["role"] == "tool":
        return True
    content = last["content"]
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def a_model_that_uses_tools(summary_chars: int, result_chars: int) -> ByRequest:
    """Each turn: two tool calls (one with a big result), then an answer; summaries on demand."""
    def choose(body: dict[str, Any]) -> Reply:
        if _summary_request(body):
            return Reply(text="Summary: " + "they asked about the weather; " * (summary_chars // 30))
        if _after_results(body):
            return Reply(text="Done: it is 9 degrees in Oslo and the data was long.")
        return Reply(text="Looking.", calls=(Call("big_result", {"size": result_chars}),
                                             Call("get_weather", {"city": "Oslo"})))
    return ByRequest(choose)


def conversation_through(kit: Kit, store, budget: int, *, turns: int, min_keep_turns: int,
                         result_chars: int = 3000, summary_chars: int = 400):
    kit.emulator.default = a_model_that_uses_tools(summary_chars, result_chars)
    registry = Registry.from_modules(TOOLS)
    runtime = Runtime(store=store, registry=registry, pubsub=PubSub("embedded://compaction-providers"),
                      config=Config(), rules=Rules(providers=kit.access().provider_for),
                      sleep=lambda s: None)
    commands = Commands(store, registry, policy=kit.policy())
    conversation = commands.create_conversation(SCOPE, kit.settings(
        tools=["big_result", "get_weather"],
        compaction={"max_context_tokens": budget, "min_keep_turns": min_keep_turns},
    ))
    for turn in range(turns):
        _, follow = commands.post_message(conversation.id, f"Weather in Oslo, take {turn}?", SCOPE)
        drain(runtime, follow)
    return store.log.list_events(conversation.id), store.log.list_summaries(conversation.id)


def assert_every_turn_answered(events, turns: int) -> None:
    assert [e.type for e in events if e.type == "error"] == []
    answers = [e for e in events if e.type == "assistant_msg" and e.content["text"].startswith("Done")]
    assert len(answers) == turns and events[-1] is answers[-1]


def test_a_tool_heavy_conversation_compacts_with_summaries_the_provider_accepts(kit: Kit, sqlite_store):
    events, summaries = conversation_through(kit, sqlite_store, 3000, turns=6, min_keep_turns=1)
    assert summaries, "no compaction happened"
    assert_every_turn_answered(events, 6)
    summary_bodies = [body for body in kit.emulator.received if _summary_request(body)]
    assert summary_bodies and kit.emulator.refused == []


def test_a_provider_counting_more_tokens_than_the_budget_never_fails_a_turn(kit: Kit, sqlite_store):
    """The provider's limit is under the budget and it counts the whole JSON body: requests
    and summary pieces are refused as too long, and each is compacted or sent shorter."""
    kit.emulator.max_context_tokens = 700
    events, summaries = conversation_through(kit, sqlite_store, 900, turns=6, min_keep_turns=2,
                                             summary_chars=1200)
    assert_every_turn_answered(events, 6)
    assert summaries and kit.emulator.refused
    reasons = {problem["error"]["message"] if "error" in problem else str(problem)
               for _, problem in kit.emulator.refused}
    assert all("too long" in r or "maximum context length" in r for r in reasons), reasons
