"""Every request a conversation sends stays within its budget and is valid for both providers.

A property over generated logs (any shape the core can hold, texts and results of any
size, with or without a summary), budgets and summaries of any length: the model calls
and the compactions before them are planned exactly as the runtime plans them, and every
request on the way, the summary pieces included, is checked by the token estimate the
budget is in, by `validate`, by each provider's wire rules and by both strict emulators.
"""
from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentq.core.budget import fit, plan_context
from agentq.core.compaction import request_tokens
from agentq.core.events import Event, Summary, View
from agentq.core.request import Request
from agentq.core.render import check_anthropic, check_openai, render, to_anthropic, to_openai, validate
from agentq.core.summaries import smallest_summary_budget, summary_request, transcript
from agentq.providers.anthropic import messages_body
from agentq.providers.openai_chat import chat_body
from tests.support.emulators import anthropic_api, openai_api
from tests.support.emulators.kit import WEATHER
from tests.core import builders as b
from tests.core.strategies import conversation_logs

TOOLS = (WEATHER,)
SIZES = st.sampled_from([0, 0, 12, 90, 700, 3000])
WORDS = "the weather in Oslo is cold and wet today, "


def text_of(size: int) -> str:
    return (WORDS * (size // len(WORDS) + 1))[:size]


@st.composite
def views(draw) -> View:
    """A generated log that needs a model call, with texts and results inflated, maybe after
    a summary, with settings."""
    events = []
    for event in draw(conversation_logs(max_turns=5)):
        size = draw(SIZES)
        if event.type in ("user_msg", "assistant_msg") and size:
            event = replace(event, content={**event.content, "text": text_of(size)})
        elif event.type == "tool_result" and size:
            event = replace(event, content={**event.content, "output": text_of(size)})
        events.append(event)
    if render(b.view(tuple(events))).messages[-1].role == "assistant":
        events.append(question_after(events[-1]))  # a closed turn: the next call has a question
    summary = None
    if draw(st.booleans()):
        offset = draw(st.integers(1, 40))
        events = [replace(e, seq=e.seq + offset) for e in events]
        summary = b.summary(offset, text_of(draw(st.integers(0, 6000))))
    return b.view(tuple(events), summary=summary, system=text_of(draw(st.integers(0, 400))),
                  model="m-1", compaction={
                      "max_context_tokens": 10**6,  # set by the test, past its floor
                      "min_keep_turns": draw(st.integers(1, 3)),
                      "max_result_tokens": draw(st.none() | st.integers(16, 2000)),
                  })


def question_after(event: Event) -> Event:
    question = b.log(b.user("and tomorrow?"), start_seq=event.seq + 1)[0]
    return replace(question, turn_id=f"t{question.seq}")


def smallest_budget(view: View) -> int:
    """The least budget a conversation can keep: its current turn after a long summary, with
    every text shortened, and the summary requests."""
    starts = [e.seq for e in view.events if e.type == "user_msg"]
    turn = tuple(e for e in view.events if not starts or e.seq >= starts[-1])
    last = replace(view, events=turn, summary=b.summary(0, text_of(5000)))
    request, _ = fit(render(last, TOOLS), last, budget=0)
    return max(request_tokens(request), smallest_summary_budget(view))


def with_budget(view: View, budget: int) -> View:
    compaction = view.settings.compaction.model_copy(update={"max_context_tokens": budget})
    return replace(view, settings=view.settings.model_copy(update={"compaction": compaction}))


def assert_sendable(request: Request, view: View) -> None:
    budget = view.settings.compaction.max_context_tokens
    assert request_tokens(request) <= budget
    assert validate(request) == []
    assert check_openai(to_openai(request)) == [] and check_anthropic(to_anthropic(request)) == []
    assert openai_api.check(chat_body(request, view.settings), 10**9) is None
    headers = {"anthropic-version": "2023-06-01"}
    assert anthropic_api.check(messages_body(request, view.settings), headers, 10**9) is None


def compacted(view: View, to_seq: int, summary: str) -> View:
    version = view.summary.version + 1 if view.summary else 1
    written = Summary("s", view.conversation_id, 1, to_seq, {"text": summary}, version, b.T0)
    return replace(view, summary=written, events=tuple(e for e in view.events if e.seq > to_seq))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(views(), st.integers(0, 3000), st.data())
def test_every_request_on_the_way_to_an_answer_is_within_budget_and_valid(view, slack, data):
    view = with_budget(view, smallest_budget(view) + slack)
    for _ in range(20):  # each compaction moves the summary on by at least one turn
        context = plan_context(view, TOOLS)
        if context.cut is None:
            assert_sendable(context.request, view)
            return
        text, summary, start = transcript(view, context.cut - 1), "", 0
        summary = view.summary.content["text"] if view.summary else ""
        while True:  # the summary, piece by piece, as the compact step writes it
            request, start = summary_request(view, summary, text, start,
                                             budget=view.settings.compaction.max_context_tokens)
            assert_sendable(request, view)
            summary = text_of(data.draw(st.integers(0, 8000), label="summary length"))
            if start >= len(text):
                break
        view = compacted(view, context.cut - 1, summary)
    raise AssertionError("compaction did not converge")


def test_a_turn_that_alone_passes_the_budget_is_shortened_results_first():
    view = b.view(b.log(b.user("Weather in Oslo?"), b.assistant("Checking.", round="r1"),
                        b.call("c1", round="r1"), b.result("c1", "ok", text_of(4000))),
                  compaction={"max_context_tokens": 300, "max_result_tokens": 2000})
    context = plan_context(view, TOOLS)
    assert context.cut is None and request_tokens(context.request) <= 300
    assert [e["kind"] for e in context.evictions] == ["tool_result"]
    assert context.request.messages[0].text == "Weather in Oslo?"  # the person's words stay whole
