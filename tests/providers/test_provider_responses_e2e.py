"""A whole conversation on the Responses API, driven through the HTTP API against its strict emulator.

Reasoning with parallel tool calls, a human call resolved, a human call cut short by an
interrupting message, a fork that carries the reasoning items on, and compaction: every
request the adapter sends must pass every rule of the emulator (stateless, so each round's
reasoning items go back whole, before the calls they preceded).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.api import Api
from tests.support.emulators import ByRequest, Call, Reply
from tests.support.emulators.kit import Kit, running

REASONER = "emu-reasoner-1"
OSLO_AND_BERGEN = (Call("get_weather", {"city": "Oslo"}), Call("get_weather", {"city": "Bergen"}))


@pytest.fixture
def kit() -> Iterator[Kit]:
    with running("openai_responses") as emulator:
        yield Kit("openai_responses", emulator)


def _called(body: dict[str, Any], call_id: str) -> str:
    return next(i["name"] for i in body["input"] if i.get("type") == "function_call" and i["call_id"] == call_id)


def a_reasoning_model(body: dict[str, Any]) -> Reply:
    """Answers from what it reads: a summary when asked without tools, else by the last item."""
    if "tools" not in body:
        return Reply(text="Summary: the user asked about the weather and payments; Bob was paid.")
    last = body["input"][-1]
    if last.get("type") == "function_call_output":
        done = "Cold everywhere."
        if _called(body, last["call_id"]) == "approve_payment":
            done = "Not paid." if last["output"].startswith("[error]") else "Paid."
        return Reply(text=done, thinking="I have what I need.")
    text = last["content"]
    if text.startswith("Pay"):
        who, amount = text.split()[1], float(text.split()[2])
        return Reply(text="I need an approval.", calls=(Call("approve_payment", {"amount": amount, "to": who}),))
    if text.startswith("Tell"):
        return Reply(text="Once upon a time " * 40, chunks=40, hold=True)  # until hung up
    if "Tromsø" in text:
        return Reply(text="", calls=(Call("get_weather", {"city": "Tromsø"}),))
    if "Oslo" in text:
        return Reply(text="", thinking="Two cities: both at once.", calls=OSLO_AND_BERGEN)
    return Reply(text="Noted.")


def test_reasoning_parallel_tools_human_calls_interrupt_fork_and_compaction_pass_the_strict_emulator(
        kit: Kit, sqlite_store) -> None:
    kit.emulator.default = ByRequest(a_reasoning_model)
    api = Api(sqlite_store, policy=kit.policy(), env=kit.env)
    alice = api.key("acme", "alice")
    cid = api.create(alice, profile=kit.name, model=REASONER, tools=["get_weather", "approve_payment"],
                     reasoning={"effort": "low", "summary": "auto"}, temperature=0.2,
                     compaction={"max_context_tokens": 800, "min_keep_turns": 1})  # the whole body counts

    api.say(cid, "Weather in Oslo and Bergen?", alice)
    api.run()
    fork = api.client.post(f"/v1/conversations/{cid}/fork", headers=alice,
                           json={"at_seq": api.store.log.list_events(cid)[-1].seq})
    assert fork.status_code == 201, fork.json
    sent_before_fork = len(kit.emulator.received)
    api.say(fork.json["id"], "Pay Dan 3", alice)
    api.run()
    resolve_pending(api, fork.json["id"], alice, {"status": "errored", "result": "declined"})
    api.run()
    sent_after_fork = len(kit.emulator.received)

    api.say(cid, "Pay Bob 20", alice)
    api.run()
    resolve_pending(api, cid, alice, {"status": "resolved", "result": {"approved": True}})
    api.run()
    api.say(cid, "Pay Carol 5", alice)
    api.run()
    assert api.get(f"/v1/conversations/{cid}", alice).json["state"] == "awaiting_input"
    assert api.say(cid, "Never mind: weather in Tromsø?", alice, on_busy="interrupt").status_code == 202
    api.run()
    interrupt_mid_stream(api, kit, cid, alice)
    for turn in range(3):  # long enough to compact
        api.say(cid, f"Weather in Oslo and Bergen, take {turn}?", alice)
        api.run()

    assert kit.emulator.refused == [] and kit.emulator.problems == []
    events = api.store.log.list_events(cid)
    assert [e for e in events if e.type == "error"] == []
    assert api.store.log.list_summaries(cid), "no compaction happened"
    check_reasoning_is_kept_and_sent_back(kit, events)
    check_interrupt_closed_the_human_call(events)
    check_the_fork_sent_the_reasoning_of_its_copied_log(
        kit, api.store.log.list_events(fork.json["id"]), kit.emulator.received[sent_before_fork:sent_after_fork])
    context = api.get(f"/v1/conversations/{cid}/context", alice).json
    assert context["kind"] == "openai_responses" and context["validation"]["valid"], context["validation"]
    assert any(item.get("type") == "reasoning" for item in context["wire"]["input"])


def interrupt_mid_stream(api: Api, kit: Kit, cid: str, alice: dict[str, str]) -> None:
    """A message that interrupts a round while it streams: the call is hung up, its partial
    text kept as an interrupted assistant_msg, and the next request is still accepted."""
    api.say(cid, "Tell me a long story", alice)
    subscription = api.pubsub.subscribe(cid, timeout_s=0.05)
    worker = threading.Thread(target=api.run)
    worker.start()
    deadline = time.monotonic() + 30
    for notice in subscription:  # until the story streams
        assert time.monotonic() < deadline, "the story never streamed"
        if notice is not None and notice.kind == "delta":
            break
    subscription.close()
    assert api.say(cid, "Stop: weather in Oslo and Bergen?", alice, on_busy="interrupt").status_code == 202
    worker.join(timeout=30)
    assert not worker.is_alive() and kit.emulator.wait_for_hangup() is not None
    api.run()
    kept = [e for e in api.store.log.list_events(cid) if e.type == "assistant_msg" and e.content["interrupted"]]
    assert kept[-1].content["text"].startswith("Once upon a time")
    assert "reasoning" not in kept[-1].content  # the response never completed


def resolve_pending(api: Api, cid: str, headers: dict[str, str], body: dict[str, Any]) -> None:
    [pending] = api.get(f"/v1/conversations/{cid}", headers).json["pending"]
    assert pending["name"] == "approve_payment"
    path = f"/v1/conversations/{cid}/tool-calls/{pending['tool_call_id']}/resolution"
    assert api.client.post(path, json=body, headers=headers).status_code == 200


def check_reasoning_is_kept_and_sent_back(kit: Kit, events) -> None:
    """Every answer of the reasoning model keeps its item verbatim; later requests carry it whole."""
    answers = [e for e in events if e.type == "assistant_msg" and not e.content["interrupted"]]
    kept = [entry for e in answers for entry in e.content.get("reasoning", ())]
    assert len(kept) == len(answers) and all(entry["provider"] == "openai_responses" for entry in kept)
    issued = kit.emulator.memory.encrypted
    assert all(entry["item"]["encrypted_content"] == issued[entry["item"]["id"]] for entry in kept)
    rounds = [body for body in kit.emulator.received if "tools" in body]
    assert all(body["store"] is False and "temperature" not in body for body in rounds)
    last = rounds[-1]["input"]
    ids = [item.get("id") for item in last if item.get("type") == "reasoning"]
    assert ids and set(ids) <= set(issued)
    for position, item in enumerate(last):  # each call's reasoning item comes before it
        if item.get("type") == "function_call":
            needed = kit.emulator.memory.reasoning_of_call[item["call_id"]]
            assert needed in ids[: sum(1 for i in last[:position] if i.get("type") == "reasoning")]


def check_interrupt_closed_the_human_call(events) -> None:
    carol = next(e for e in events if e.type == "tool_call" and e.content["args"].get("to") == "Carol")
    [closed] = [e for e in events if e.type == "tool_result"
                and e.content["tool_call_id"] == carol.content["tool_call_id"]]
    assert closed.content["status"] == "cancelled"
    texts = [e.content["text"] for e in events if e.type == "user_msg"]
    assert texts.index("Never mind: weather in Tromsø?") == texts.index("Pay Carol 5") + 1


def check_the_fork_sent_the_reasoning_of_its_copied_log(kit: Kit, fork_events, bodies) -> None:
    """The fork's first request carries the copied turn's reasoning items; its human call,
    declined, goes back as a function_call_output after its reasoning and call."""
    copied = [entry["item"]["id"] for e in fork_events[:7] if e.type == "assistant_msg"
              for entry in e.content.get("reasoning", ())]
    sent = [item["id"] for item in bodies[0]["input"] if item.get("type") == "reasoning"]
    assert len(copied) == 2 and sent == copied
    kinds = [item.get("type", item.get("role")) for item in bodies[-1]["input"]]
    assert kinds[-4:] == ["reasoning", "assistant", "function_call", "function_call_output"], kinds
    assert bodies[-1]["input"][-1]["output"].startswith("[error]")
    assert fork_events[-1].type == "assistant_msg" and fork_events[-1].content["text"] == "Not paid."
