"""The whole conversation shape, through the HTTP API, against each API's strict emulator.

One test per API (chat completions, Messages, Responses): thinking / reasoning, parallel tool calls,
a human call resolved, a human call interrupted by a new message, compaction, a fork that
goes on by itself. Every request the worker sends must pass the emulator's documented rules
(thinking blocks first and signed, reasoning-model options, pairing, cache breakpoints).
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.api import Api
from tests.support.emulators import ByRequest, Call, Reply
from tests.support.emulators.kit import Kit, running

SYSTEM = "You help with weather and payments."
SUMMARY = "They asked about the weather in Oslo and Bergen and paid Bob."


@pytest.fixture(params=["openai", "anthropic", "openai_responses"])
def kit(request: pytest.FixtureRequest) -> Iterator[Kit]:
    with running(request.param) as emulator:
        yield Kit(request.param, emulator)


class Model:
    """Answers in script order; a request without tools is a summary request."""

    def __init__(self, thinking: bool) -> None:
        self.replies: deque[Reply] = deque()
        self.thinking = "Let me think this through." if thinking else ""
        self.summaries = 0

    def say(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def __call__(self, body: dict[str, Any]) -> Reply:
        if not body.get("tools"):
            self.summaries += 1
            return Reply(text=SUMMARY)
        reply = self.replies.popleft()
        return Reply(text=reply.text, calls=reply.calls, thinking=self.thinking if reply.calls else "")


def _settings(kit: Kit) -> dict[str, Any]:
    common = {"system": SYSTEM, "tools": ["get_weather", "approve_payment"],
              "compaction": {"max_context_tokens": 160, "min_keep_turns": 1}}
    if kit.name == "anthropic":
        return {**common, "model": "emu-model-1", "thinking": {"budget_tokens": 1024},
                "temperature": 0.5}
    return {**common, "model": "o3-mini", "reasoning_effort": "low", "max_tokens": 500,
            "temperature": 0.5}


def _pending(api: Api, cid: str, alice: dict) -> list[dict]:
    return api.get(f"/v1/conversations/{cid}", alice).json["pending"]


def _turn(api: Api, cid: str, alice: dict, content: str, **body: Any) -> None:
    response = api.say(cid, content, alice, **body)
    assert response.status_code == 202, response.json
    api.run()


def test_every_shape_of_a_conversation_passes_the_strict_emulator(kit: Kit, sqlite_store):
    model = Model(thinking=kit.name == "anthropic")
    kit.emulator.default = ByRequest(model)
    api = Api(sqlite_store, policy=kit.policy(), env=kit.env)
    alice = api.key("acme", "alice")
    cid = api.create(alice, profile=kit.name, **_settings(kit))

    # 1. thinking + two parallel tool calls, then the answer
    model.say(Reply(text="", calls=(Call("get_weather", {"city": "Oslo"}),
                                     Call("get_weather", {"city": "Bergen"}))),
              Reply(text="Oslo and Bergen are both mild."))
    _turn(api, cid, alice, "Weather in Oslo and Bergen?")
    fork_at = api.get(f"/v1/conversations/{cid}", alice).json["last_seq"]

    # 2. a human call, resolved by a person
    model.say(Reply(text="", calls=(Call("approve_payment", {"amount": 10, "to": "Bob"}),)),
              Reply(text="Paid Bob 10 EUR."))
    _turn(api, cid, alice, "Pay Bob 10 EUR")
    [call] = _pending(api, cid, alice)
    url = f"/v1/conversations/{cid}/tool-calls/{call['tool_call_id']}/resolution"
    assert api.client.post(url, json={"status": "resolved", "result": "approved"},
                           headers=alice).status_code == 200
    api.run()

    # 3. another human call, interrupted by a new message: it is cancelled, a new turn runs
    model.say(Reply(text="", calls=(Call("approve_payment", {"amount": 99, "to": "Eve"}),)))
    _turn(api, cid, alice, "Pay Eve 99 EUR")
    assert len(_pending(api, cid, alice)) == 1
    model.say(Reply(text="", calls=(Call("get_weather", {"city": "Tromsø"}),)),
              Reply(text="Tromsø is cold."))
    _turn(api, cid, alice, "Never mind that: weather in Tromsø?", on_busy="interrupt")

    # 4. a fork after turn 1 goes on by itself, with what turn 1 returned
    fork = api.client.post(f"/v1/conversations/{cid}/fork", json={"at_seq": fork_at}, headers=alice)
    assert fork.status_code == 201, fork.json
    model.say(Reply(text="", calls=(Call("get_weather", {"city": "Bodø"}),)), Reply(text="Windy."))
    _turn(api, fork.json["id"], alice, "And Bodø?")

    emulator = kit.emulator
    assert not emulator.refused, emulator.refused
    assert not model.replies  # every scripted answer was asked for
    events = api.store.log.list_events(cid)
    results = [e.content["status"] for e in events if e.type == "tool_result"]
    assert results == ["ok", "ok", "ok", "cancelled", "ok"]
    assert events[-1].type == "assistant_msg" and events[-1].content["text"] == "Tromsø is cold."
    state = api.get(f"/v1/conversations/{cid}", alice).json
    assert state["state"] == "idle" and state["summary"] is not None and model.summaries >= 1
    fork_events = api.store.log.list_events(fork.json["id"])
    assert fork_events[-1].content["text"] == "Windy."
    context = api.get(f"/v1/conversations/{cid}/context", alice).json
    assert context["validation"]["valid"], context["validation"]

    if kit.name == "anthropic":  # thinking: stored verbatim, sent back first in its round
        reasoned = [e for e in events if e.type == "assistant_msg" and e.content.get("reasoning")]
        assert len(reasoned) == 4  # the four rounds that called tools right after a user message
        fork_body = emulator.received[-1]
        first_reply = fork_body["messages"][1]["content"]
        assert first_reply[0]["type"] == "thinking"
        assert "temperature" not in fork_body
        sent_next = [m for m in context["request"]["messages"] if m.get("reasoning")]
        assert sent_next and context["wire"]["messages"][1]["content"][0]["type"] == "thinking"
    elif kit.name == "openai_responses":  # stateless: reasoning items go back before their calls
        reasoned = [e for e in events if e.type == "assistant_msg" and e.content.get("reasoning")]
        assert reasoned and not emulator.problems
        kinds = [item.get("type", item.get("role")) for item in emulator.received[-1]["input"]]
        assert kinds[-3:] == ["reasoning", "function_call", "function_call_output"], kinds
        for body in emulator.received:
            assert body["store"] is False and "temperature" not in body
        assert any(item.get("type") == "reasoning" for item in context["wire"]["input"])
    else:  # a reasoning model: its own options, never the sampling ones
        for body in emulator.received:
            assert "max_tokens" not in body and "temperature" not in body
            assert body.get("reasoning_effort", "low") == "low"
