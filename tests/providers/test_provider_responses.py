"""The OpenAI Responses adapter's own details, and the strictness of the Responses emulator.

What every adapter shares (streaming, parallel calls, retries, cancellation, secrets, audit,
every conversation shape of the core) runs against this one too, in test_provider_contract.py.
Each emulator rule a test relies on is named (tests/support/emulators/responses_rules.py).
"""
from __future__ import annotations

import dataclasses
import threading
from types import SimpleNamespace as NS

import httpx2
import openai
import pytest

from agentq.core.reasoning import Reasoning
from agentq.core.request import CallRef, Message, Request
from agentq.core.responses_wire import PROVIDER, check_responses, to_responses
from agentq.core.settings import parse_settings
from agentq.providers.answer import Answer
from agentq.providers.errors import ContextTooLong, ProviderError
from agentq.providers.openai_responses import EventReader
from agentq.runtime.model_call import ModelCall, RoundInfo
from agentq.runtime.timers import Timers
from tests.support.announce import unheard
from tests.support.emulators import Call, Fail, Reply
from tests.support.emulators.kit import HELLO, Kit, WEATHER, kit_fixtures
from tests.support.emulators.responses_api import ResponsesEmulator
from tests.support.emulators.responses_rules import Memory, check

REASONER = "emu-reasoner-1"
TWO_CITIES = (Call("get_weather", {"city": "Oslo"}), Call("get_weather", {"city": "Bergen"}))


served, kit = kit_fixtures("openai_responses")


def reasoning_settings(kit: Kit, **options):
    return kit.settings(model=REASONER, reasoning={"effort": "low", "summary": "auto"}, **options)


def ask(kit: Kit, request: Request, **settings):
    return kit.answer(dataclasses.replace(request, model=REASONER), settings=reasoning_settings(kit, **settings))


def answered(request: Request, response, outputs: dict[str, str]) -> Request:
    """`request` followed by the model's round (with its reasoning) and the calls' outputs."""
    round_ = Message("assistant", response.text, tool_calls=response.tool_calls, reasoning=response.reasoning)
    results = tuple(Message("tool", outputs[c.args["city"]], tool_call_id=c.id) for c in response.tool_calls)
    return dataclasses.replace(request, messages=request.messages + (round_,) + results)


def refused_rule(kit: Kit) -> str:
    assert kit.emulator.problems, "the emulator refused nothing"
    return kit.emulator.problems[-1].rule


# ---- the wire --------------------------------------------------------------------------------------


def test_a_request_is_stateless_with_instructions_flat_tools_and_outputs_as_items(kit: Kit) -> None:
    first = kit.answer(settings=kit.settings())  # a model that does not reason
    body = kit.emulator.received[-1]
    assert body["store"] is False and body["stream"] is True and "include" not in body
    assert body["instructions"] == "Be brief." and body["input"] == [{"role": "user", "content": "Weather in Oslo?"}]
    assert body["tools"] == [{"type": "function", "name": "get_weather", "description": WEATHER.description,
                              "parameters": WEATHER.parameters, "strict": False}]
    assert first.reasoning == () and first.sent == body
    call = CallRef("call_1", "get_weather", {"city": "Oslo"})
    kit.answer(dataclasses.replace(HELLO, messages=HELLO.messages + (
        Message("assistant", "Checking.", tool_calls=(call,)),
        Message("tool", "[error] too cold", tool_call_id="call_1", is_error=True))))
    assert kit.emulator.received[-1]["input"][1:] == [
        {"role": "assistant", "content": "Checking."},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "[error] too cold"},
    ]


def test_a_reasoning_model_gets_its_reasoning_setting_encrypted_items_and_no_temperature(kit: Kit) -> None:
    ask(kit, HELLO, temperature=0.7, max_tokens=500)
    body = kit.emulator.received[-1]
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}
    assert body["include"] == ["reasoning.encrypted_content"] and body["max_output_tokens"] == 500
    assert "temperature" not in body and kit.emulator.refused == []
    kit.answer(dataclasses.replace(HELLO, model="o4-mini"), settings=kit.settings(temperature=0.7))
    assert "temperature" not in kit.emulator.received[-1]  # an o-series model reasons unasked
    assert kit.emulator.received[-1]["include"] == ["reasoning.encrypted_content"]


def test_tool_choice_and_the_answers_schema_go_in_the_responses_apis_words(kit: Kit) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
              "additionalProperties": False}
    kit.answer(settings=kit.settings(tool_choice={"name": "get_weather"},
                                     response_format={"name": "place", "schema": schema}))
    sent = kit.emulator.received[-1]
    assert sent["tool_choice"] == {"type": "function", "name": "get_weather"}
    assert sent["text"] == {"format": {"type": "json_schema", "name": "place", "schema": schema, "strict": True}}
    assert "response_format" not in sent and kit.emulator.refused == []
    ask(kit, HELLO, reasoning_effort="high", tool_choice="required")
    sent = kit.emulator.received[-1]
    assert sent["tool_choice"] == "required" and sent["reasoning"]["effort"] == "low"  # the object wins
    kit.answer(dataclasses.replace(HELLO, model="gpt-5-mini"), settings=kit.settings(reasoning_effort="high"))
    assert kit.emulator.received[-1]["reasoning"] == {"effort": "high"}


@pytest.mark.parametrize("reasoning", [{"effort": "huge"}, {"summary": "long"}, {"effort": "low", "budget": 1},
                                       "high"])
def test_the_reasoning_setting_is_declared_and_validated(reasoning) -> None:
    with pytest.raises(ValueError):
        parse_settings({"reasoning": reasoning})
    assert parse_settings({"reasoning": {"effort": "minimal"}}).reasoning.effort == "minimal"


# ---- answers: text, parallel calls, reasoning, usage ------------------------------------------------


def test_text_streams_and_reasoning_summaries_are_not_answer_text(kit: Kit) -> None:
    kit.emulator.then(Reply(text="Sunny in Oslo.", thinking="The user wants the weather.", chunks=3))
    items = kit.run(dataclasses.replace(HELLO, model=REASONER), settings=reasoning_settings(kit))
    response = items[-1]
    assert "".join(d.text for d in items[:-1]) == "Sunny in Oslo." == response.text
    [item] = response.reasoning
    assert item.provider == PROVIDER and item.index == 0
    assert item.item["type"] == "reasoning" and item.item["summary"][0]["text"] == "The user wants the weather."
    assert item.item["encrypted_content"] == kit.emulator.memory.encrypted[item.item["id"]]


def test_parallel_calls_keep_their_reasoning_item_before_them_at_its_output_index(kit: Kit) -> None:
    kit.emulator.then(Reply(text="", calls=TWO_CITIES))
    response = ask(kit, HELLO)
    assert [(c.name, c.args) for c in response.tool_calls] == [
        ("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Bergen"})]
    assert response.finish_reason == "tool_calls" and [r.index for r in response.reasoning] == [0]


def test_reasoning_items_go_back_verbatim_across_rounds_and_the_api_accepts_them(kit: Kit) -> None:
    """Three rounds of one turn: two parallel calls, one more call, the answer. Each round's
    reasoning item goes back with its encrypted content, before the calls it preceded."""
    kit.emulator.then(Reply(text="", thinking="Both cities.", calls=TWO_CITIES),
                      Reply(text="One more.", calls=(Call("get_weather", {"city": "Tromsø"}),)),
                      Reply(text="Cold everywhere."))
    request = dataclasses.replace(HELLO, model=REASONER)
    first = ask(kit, request)
    request = answered(request, first, {"Oslo": "9C", "Bergen": "11C"})
    second = ask(kit, request)
    request = answered(request, second, {"Tromsø": "2C"})
    third = ask(kit, request)
    assert third.text == "Cold everywhere." and kit.emulator.refused == []
    items = kit.emulator.received[-1]["input"]
    kinds = [i.get("type", i.get("role")) for i in items]
    assert kinds == ["user", "reasoning", "function_call", "function_call", "function_call_output",
                     "function_call_output", "reasoning", "assistant", "function_call", "function_call_output"]
    assert items[1] == first.reasoning[0].item and items[6] == second.reasoning[0].item


def test_reasoning_interleaved_with_calls_goes_back_in_its_places() -> None:
    rs = [Reasoning(PROVIDER, {"type": "reasoning", "id": f"rs_{n}", "summary": [], "encrypted_content": "x"}, n)
          for n in (0, 2)]
    calls = (CallRef("c1", "w", {}), CallRef("c2", "w", {}))
    foreign = Reasoning("anthropic", {"type": "thinking", "thinking": "t", "signature": "s"}, 0)
    request = Request(system="", model="m", messages=(
        Message("user", "q"), Message("assistant", "", tool_calls=calls, reasoning=(*rs, foreign)),
        Message("tool", "a", tool_call_id="c1"), Message("tool", "b", tool_call_id="c2")))
    body = to_responses(request)
    assert [i.get("id") or i.get("call_id") or i.get("role") for i in body["input"]] == [
        "user", "rs_0", "c1", "rs_2", "c2", "c1", "c2"]
    assert check_responses(body) == []


def test_usage_counts_cached_input_and_reasoning_tokens(kit: Kit) -> None:
    kit.emulator.then(Reply(text="", calls=TWO_CITIES), Reply(text="Done."))
    first = ask(kit, HELLO)
    second = ask(kit, answered(dataclasses.replace(HELLO, model=REASONER), first, {"Oslo": "9C", "Bergen": "1C"}))
    assert first.usage["reasoning_tokens"] > 0 and "cache_read_input_tokens" not in first.usage
    assert 0 < second.usage["cache_read_input_tokens"] < second.usage["input_tokens"]
    assert second.usage["output_tokens"] > second.usage["reasoning_tokens"]


# ---- the emulator refuses what the API refuses, each rule by name -----------------------------------


def test_dropping_a_reasoning_item_before_its_calls_is_refused(kit: Kit) -> None:
    kit.emulator.then(Reply(text="", calls=TWO_CITIES))
    first = ask(kit, HELLO)
    request = answered(dataclasses.replace(HELLO, model=REASONER), first, {"Oslo": "9C", "Bergen": "1C"})
    without = dataclasses.replace(request, messages=tuple(
        dataclasses.replace(m, reasoning=()) for m in request.messages))
    with pytest.raises(ProviderError) as raised:
        ask(kit, without)
    assert raised.value.status == 400 and not raised.value.transient
    assert refused_rule(kit) == "call_needs_its_reasoning"


@pytest.mark.parametrize("change, rule", [
    (lambda item: {k: v for k, v in item.items() if k != "encrypted_content"}, "reasoning_sent_back_whole"),
    (lambda item: {**item, "encrypted_content": item["encrypted_content"][:-4] + "AAAA"}, "encrypted_content_verified"),
    (lambda item: {**item, "signature": "x"}, "unknown_parameter"),
], ids=["no-encrypted-content", "tampered", "unknown-field"])
def test_a_reasoning_item_must_come_back_whole_and_untouched(kit: Kit, change, rule: str) -> None:
    kit.emulator.then(Reply(text="", calls=TWO_CITIES))
    first = ask(kit, HELLO)
    spoiled = tuple(dataclasses.replace(r, item=change(r.item)) for r in first.reasoning)
    request = answered(dataclasses.replace(HELLO, model=REASONER),
                       dataclasses.replace(first, reasoning=spoiled), {"Oslo": "9C", "Bergen": "1C"})
    with pytest.raises(ProviderError):
        ask(kit, request)
    assert refused_rule(kit) == rule


def body(*items, **fields) -> dict:
    return {"model": REASONER, "input": list(items), "store": False, **fields}


USER = {"role": "user", "content": "q"}
CALL = {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "ok"}
TOOL = {"type": "function", "name": "w", "parameters": {"type": "object", "properties": {"a": {}}}, "strict": False}


@pytest.mark.parametrize("request_body, rule", [
    (body(USER, OUTPUT), "output_needs_its_call"),
    (body(USER, CALL), "call_needs_its_output"),
    (body(USER, CALL, OUTPUT, OUTPUT), "one_output_per_call"),
    (body(USER, CALL, OUTPUT, CALL, OUTPUT), "call_ids_unique"),
    (body(USER, seed=7), "unknown_parameter"),
    (body({**USER, "name": "bob"}), "unknown_parameter"),
    (body({"type": "tool", "call_id": "c1"}), "item_type"),
    (body({"role": "tool", "content": "x"}), "message_role"),
    (body({"role": "user", "content": [{"type": "output_text", "text": "x"}]}), "content_part_for_role"),
    (body({**CALL, "arguments": {}}, OUTPUT), "arguments_are_text"),
    (body(USER, temperature=0.5), "no_sampling_for_reasoning_models"),
    ({**body(USER), "model": "gpt-4.1", "reasoning": {"effort": "low"}}, "reasoning_needs_a_reasoning_model"),
    ({**body(USER), "model": "gpt-4.1", "include": ["reasoning.encrypted_content"]},
     "encrypted_content_needs_a_reasoning_model"),
    (body(USER, reasoning={"effort": "extreme"}), "reasoning_shape"),
    (body(USER, include=["reasoning.everything"]), "include_values"),
    (body(USER, max_output_tokens=8), "max_output_tokens_minimum"),
    (body(USER, stream_options={"include_obfuscation": False}), "stream_options_need_stream"),
    (body(USER, tools=[{**TOOL, "strict": True}]), "strict_schema"),
    (body(USER, tools=[{"type": "function", "function": {"name": "w"}}]), "unknown_parameter"),
    (body(USER, tools=[TOOL, TOOL]), "tool_names_unique"),
    (body(), "input_not_empty"),
    (body({"role": "user", "content": [{"type": "input_image", "image_url": {"url": "https://a.b/c.png"}}]}),
     "image_url_or_data_url"),
    (body({"role": "user", "content": [{"type": "input_image", "image_url": "http://a.b/c.png",
                                        "detail": "auto"}]}), "image_url_or_data_url"),
    (body({"role": "user", "content": [{"type": "input_image", "image_url": "https://a.b/c.png"}]}),
     "image_detail"),
    (body(USER, tools=[TOOL], tool_choice={"type": "function", "name": "x"}), "tool_choice_names_a_tool"),
    (body(USER, tools=[TOOL], tool_choice={"type": "function", "function": {"name": "w"}}), "unknown_parameter"),
    (body(USER, tools=[TOOL], tool_choice="sometimes"), "tool_choice_shape"),
    (body(USER, text={"format": {"type": "json_schema", "json_schema": {"name": "a"}}}), "unknown_parameter"),
    (body(USER, text={"format": {"type": "xml"}}), "text_format_shape"),
    (body(USER, response_format={"type": "json_object"}), "unknown_parameter"),
    (body({"type": "reasoning", "id": "rs_x", "summary": []}, USER), "reasoning_sent_back_whole"),
])
def test_the_emulator_names_the_rule_each_refusal_keeps(request_body: dict, rule: str) -> None:
    problem = check(request_body, Memory(), 50_000)
    assert problem is not None and problem.rule == rule, problem
    assert check(body(USER, CALL, OUTPUT, tools=[TOOL]), Memory(), 50_000) is None


def test_a_reasoning_item_without_its_following_item_is_refused(kit: Kit) -> None:
    kit.emulator.then(Reply(text="", calls=TWO_CITIES))
    first = ask(kit, HELLO)
    item = first.reasoning[0].item
    lone = {**body(USER, item, {"role": "user", "content": "again"}), "include": ["reasoning.encrypted_content"]}
    assert check(lone, kit.emulator.memory, 50_000).rule == "reasoning_needs_its_following_item"


# ---- the official SDK reads the emulator's stream -----------------------------------------------------


def test_the_official_sdk_accumulates_the_stream_into_a_whole_response(kit: Kit) -> None:
    kit.emulator.then(Reply(text="Two calls.", thinking="Think.", calls=TWO_CITIES))
    client = openai.OpenAI(api_key=kit.emulator.api_key, base_url=kit.emulator.base_url, max_retries=0)
    tools = [{"type": "function", "name": "get_weather", "parameters": WEATHER.parameters, "strict": False}]
    with client.responses.stream(model=REASONER, input="Weather?", tools=tools, store=False,
                                 reasoning={"summary": "auto"}, include=["reasoning.encrypted_content"]) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert {"response.output_text.delta", "response.function_call_arguments.delta",
            "response.function_call_arguments.done", "response.reasoning_summary_text.delta"} <= set(kinds)
    assert [item.type for item in final.output] == ["reasoning", "message", "function_call", "function_call"]
    assert final.output_text == "Two calls." and final.output[0].encrypted_content
    assert final.output[2].parsed_arguments is None and final.output[2].arguments == '{"city": "Oslo"}'
    assert final.usage.output_tokens_details.reasoning_tokens > 0


# ---- failures -------------------------------------------------------------------------------------------


def test_an_error_event_in_the_stream_is_classified_by_its_code(kit: Kit) -> None:
    kit.emulator.then(Reply(text="partial", error="rate_limit_exceeded"))
    with pytest.raises(ProviderError) as raised:
        kit.answer()
    assert raised.value.transient and raised.value.code == "rate_limit_exceeded"
    kit.emulator.then(Reply(text="partial", error="invalid_prompt"))
    with pytest.raises(ProviderError) as raised:
        kit.answer()
    assert not raised.value.transient and raised.value.code == "invalid_prompt"


def test_a_failed_response_is_transient_for_a_server_error_and_compacts_for_a_long_context() -> None:
    def failed(code: str) -> NS:
        return NS(type="response.failed", response=NS(error=NS(code=code, message="it failed")))

    reader = EventReader()
    with pytest.raises(ProviderError) as raised:
        reader.read(failed("server_error"), Answer("s"))
    assert raised.value.transient
    with pytest.raises(ContextTooLong):
        reader.read(failed("context_length_exceeded"), Answer("s"))


def test_an_insufficient_quota_429_is_permanent_and_a_context_too_long_is_its_own_error(kit: Kit) -> None:
    kit.emulator.then(Fail(429, "You exceeded your current quota", code="insufficient_quota"))
    calls = ModelCall(kit.provider(), unheard(), lambda step_key: None, timers=Timers(), max_attempts=3,
                      sleep=lambda s: None)
    with pytest.raises(ProviderError) as raised:
        calls.run(HELLO, kit.ctx(), RoundInfo("c", None, "r", "s"), threading.Event(), timeout_s=30)
    assert raised.value.code == "insufficient_quota" and not raised.value.transient
    kit.emulator.max_context_tokens = 10
    with pytest.raises(ContextTooLong):
        kit.answer()
    assert refused_rule(kit) == "context_window"


def test_the_emulator_answers_like_the_api_over_http(kit: Kit) -> None:
    headers = {"authorization": f"Bearer {kit.emulator.api_key}"}
    response = httpx2.post(kit.emulator.base_url + "/responses", headers=headers,
                           json=body(USER, OUTPUT, stream=True))
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "No tool call found for function call output with call_id c1."
    assert isinstance(kit.emulator, ResponsesEmulator)
