"""render, validate and repair (inv. 3), and the two provider wire shapes."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core import builders as b
from agentq.core.compaction import find_cut
from agentq.core.request import CallRef, Message, Request, ToolSpec
from agentq.core.render import MISSING_RESULT_TEXT, render, repair, validate
from agentq.core.wire import check_anthropic, check_openai, to_anthropic, to_openai
from tests.core.strategies import conversation_logs

WEATHER = ToolSpec(
    "get_weather", "Current weather for a city.", {"type": "object", "properties": {}}
)


def rendered(*drafts, **view_args) -> Request:
    return render(b.view(b.log(*drafts), **view_args))


def one_round(*results):
    return (
        b.user("weather?"),
        b.assistant("Let me check.", round="r1"),
        b.call("c1", round="r1", args={"city": "Oslo"}),
        b.call("c2", name="approve", round="r1", executor="human"),
        *results,
    )


def test_the_system_prompt_and_model_come_from_the_settings():
    request = rendered(b.user(), system="Be brief.", model="m-1")
    assert (request.system, request.model) == ("Be brief.", "m-1")


def test_a_summary_is_a_leading_user_message():
    request = render(b.view(b.log(b.user("next"), start_seq=9), summary=b.summary(8, "they met")))
    assert request.messages[0] == Message("user", "Summary of the conversation so far:\nthey met")
    assert request.messages[1] == Message("user", "next")


def test_a_round_is_one_assistant_message_then_its_answers_in_call_order():
    request = rendered(
        *one_round(b.result("c2", output={"b": 1, "a": 2}), b.result("c1", output="sunny"))
    )
    assert request.messages[1:] == (
        Message(
            "assistant",
            "Let me check.",
            (CallRef("c1", "get_weather", {"city": "Oslo"}), CallRef("c2", "approve", {})),
        ),
        Message("tool", "sunny", tool_call_id="c1", status="ok"),
        Message("tool", '{"a": 2, "b": 1}', tool_call_id="c2", status="ok"),
    )
    assert request.repairs == ()


@pytest.mark.parametrize(
    ("status", "output", "text"),
    [
        ("error", "boom", "[error] boom"),
        ("expired", None, "[expired] no answer arrived before the call expired"),
        ("cancelled", None, "[cancelled] the call was cancelled before it returned"),
        ("cancelled", "user interrupted", "[cancelled] user interrupted"),
        ("rejected", "too much", "[rejected] too much"),
    ],
)
def test_a_result_that_is_not_ok_is_an_error_labelled_with_its_status(status, output, text):
    request = rendered(*one_round(b.result("c1"), b.result("c2", status, output)))
    assert request.messages[-1] == Message("tool", text, tool_call_id="c2", is_error=True,
                                           status=status)


def test_a_response_with_no_text_and_no_calls_is_not_rendered():
    request = rendered(b.user("hi"), b.assistant("", round="r1", interrupted=True), b.user("again"))
    assert [m.text for m in request.messages] == ["hi", "again"]
    assert request.repairs == ()


def test_suspensions_resolutions_and_errors_are_not_rendered():
    request = rendered(
        *one_round(b.suspension("c2"), b.result("c1"), b.resolution("c2"), b.result("c2")),
        b.error(status="failed_recoverable"),
    )
    assert [m.role for m in request.messages] == ["user", "assistant", "tool", "tool"]


def test_a_call_without_a_result_gets_a_recorded_cancelled_answer():
    request = rendered(*one_round(b.result("c1")))
    assert request.messages[-1] == Message(
        "tool", MISSING_RESULT_TEXT, tool_call_id="c2", is_error=True, status="cancelled"
    )
    assert request.repairs == ("added a cancelled result for unanswered tool call c2",)


def test_validate_accepts_a_well_paired_request():
    assert validate(rendered(*one_round(b.result("c1"), b.result("c2")))) == []


def test_validate_reports_an_empty_request():
    assert validate(Request("", ())) == ["the request has no messages"]


def test_validate_reports_a_first_message_that_is_not_from_the_user():
    assert validate(Request("", (Message("assistant", "hi"),))) == [
        "message 0: the first message is assistant, not user"
    ]


def test_validate_reports_an_unanswered_call():
    request = Request(
        "",
        (
            Message("user", "q"),
            Message("assistant", tool_calls=(CallRef("c1", "t", {}),)),
            Message("user", "q"),
        ),
    )
    assert validate(request) == ["message 1: tool call c1 has no answer before the next message"]


def test_validate_reports_an_orphan_tool_message():
    request = Request("", (Message("user", "q"), Message("tool", "x", tool_call_id="c9")))
    assert validate(request) == ["message 1: tool message answers no call just before it"]


def test_validate_reports_a_second_answer_and_a_duplicate_call_id():
    calls = (CallRef("c1", "t", {}),)
    request = Request(
        "",
        (
            Message("user", "q"),
            Message("assistant", tool_calls=calls),
            Message("tool", "x", tool_call_id="c1"),
            Message("tool", "y", tool_call_id="c1"),
            Message("assistant", tool_calls=calls),
            Message("tool", "z", tool_call_id="c1"),
        ),
    )
    assert validate(request) == [
        "message 3: second answer to c1",
        "message 4: duplicate tool_call_id c1",
    ]


def test_repair_drops_orphans_and_second_answers_and_records_each_fix():
    calls = (CallRef("c1", "t", {}),)
    request = Request(
        "",
        (
            Message("tool", "early", tool_call_id="c0"),
            Message("user", "q"),
            Message("assistant", tool_calls=calls),
            Message("tool", "x", tool_call_id="c1"),
            Message("tool", "y", tool_call_id="c1"),
        ),
    )
    fixed = repair(request)
    assert fixed.messages == request.messages[1:4]
    assert fixed.repairs == (
        "dropped an orphan tool message for c0",
        "dropped a second answer to tool call c1",
    )


def test_repair_leaves_a_valid_request_untouched():
    request = rendered(*one_round(b.result("c1"), b.result("c2")))
    assert repair(request) == request


MESSAGES = st.builds(
    Message,
    role=st.sampled_from(["user", "assistant", "tool"]),
    text=st.sampled_from(["", " ", "hello"]),
    tool_calls=st.lists(
        st.builds(CallRef, st.sampled_from(["c1", "c2", "c3"]), st.just("t"), st.just({})),
        max_size=3,
    ).map(tuple),
    tool_call_id=st.sampled_from([None, "c1", "c2", "c3", "c4"]),
    is_error=st.booleans(),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(MESSAGES, max_size=12))
def test_repair_makes_any_request_valid_for_us_and_both_providers(messages):
    fixed = repair(Request("sys", tuple(messages), model="m"))
    assert validate(fixed) == []
    assert check_openai(to_openai(fixed)) == []
    assert check_anthropic(to_anthropic(fixed)) == []
    assert repair(fixed).repairs == fixed.repairs


@settings(max_examples=200, deadline=None)
@given(conversation_logs(), st.integers(1, 3))
def test_every_rendered_log_is_valid_for_us_and_both_providers_even_after_a_cut(events, min_keep):
    cut = find_cut(events, min_keep_turns=min_keep)
    summary = b.summary(cut - 1) if cut else None
    kept = tuple(e for e in events if cut is None or e.seq >= cut)
    request = render(b.view(kept, summary=summary, system="Be brief.", model="m"), (WEATHER,))
    assert validate(request) == []
    assert check_openai(to_openai(request)) == []
    assert check_anthropic(to_anthropic(request)) == []


def test_the_openai_shape_answers_each_call_with_a_tool_message_right_after():
    payload = to_openai(
        rendered(
            *one_round(b.result("c2", output={"ok": True}), b.result("c1")), system="S", model="m"
        )
    )
    assert payload == {
        "model": "m",
        "messages": [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    },
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "approve", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "done"},
            {"role": "tool", "tool_call_id": "c2", "content": '{"ok": true}'},
        ],
    }


def test_the_openai_shape_lists_tools_as_functions():
    payload = to_openai(render(b.view(b.log(b.user())), (WEATHER,)))
    assert payload["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": WEATHER.parameters,
            },
        }
    ]


def test_the_anthropic_shape_puts_every_result_first_in_the_next_user_message():
    request = rendered(
        *one_round(b.result("c1"), b.result("c2", "error", "no")),
        b.user("thanks"),
        system="S",
        model="m",
    )
    assert to_anthropic(request) == {
        "model": "m",
        "system": "S",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me check."},
                    {
                        "type": "tool_use",
                        "id": "c1",
                        "name": "get_weather",
                        "input": {"city": "Oslo"},
                    },
                    {"type": "tool_use", "id": "c2", "name": "approve", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "c1",
                        "content": "done",
                        "is_error": False,
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "c2",
                        "content": "[error] no",
                        "is_error": True,
                    },
                    {"type": "text", "text": "thanks"},
                ],
            },
        ],
    }


def test_the_anthropic_shape_lists_tools_with_an_input_schema_and_omits_none():
    assert to_anthropic(render(b.view(b.log(b.user())), (WEATHER,)))["tools"] == [
        {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "input_schema": WEATHER.parameters,
        }
    ]
    assert "tools" not in to_anthropic(rendered(b.user())) and "tools" not in to_openai(
        rendered(b.user())
    )


def test_check_openai_reports_a_call_without_its_tool_message():
    payload = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}
                ],
            },
            {"role": "user", "content": "q"},
        ],
    }
    assert check_openai(payload) == ["messages[2]: tool_call_ids did not have responses: c1"]


def test_check_openai_reports_a_tool_message_without_a_call_and_bad_arguments():
    payload = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "x"},
            {"role": "tool", "tool_call_id": "c2", "content": "x"},
        ],
    }
    problems = check_openai(payload)
    assert any("not JSON text" in p for p in problems) and any("(c2)" in p for p in problems)


def test_check_anthropic_reports_results_that_are_not_first_in_the_next_user_message():
    payload = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "c1", "name": "t", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "hi"},
                    {"type": "tool_result", "tool_use_id": "c1", "content": "x"},
                ],
            },
        ],
    }
    assert check_anthropic(payload) == [
        "messages.2: tool_result blocks must come first in the content"
    ]


def test_check_anthropic_reports_a_tool_use_left_unanswered_and_broken_alternation():
    payload = {
        "model": "m",
        "messages": [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "c1", "name": "t", "input": {}}],
            },
            {"role": "assistant", "content": "more"},
        ],
    }
    assert check_anthropic(payload) == [
        "messages.0: the first message must use the user role",
        "messages.1: roles must alternate between user and assistant",
    ]


def test_check_anthropic_reports_a_result_for_a_call_the_previous_message_did_not_make():
    payload = {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "c9", "content": "x"}],
            },
        ],
    }
    assert check_anthropic(payload) == ["messages.0: unexpected or repeated tool_result for c9"]


def test_tool_arguments_reach_openai_as_json_text_of_the_same_object():
    payload = to_openai(rendered(*one_round(b.result("c1"), b.result("c2"))))
    assert json.loads(payload["messages"][1]["tool_calls"][0]["function"]["arguments"]) == {
        "city": "Oslo"
    }
