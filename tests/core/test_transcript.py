"""Transcripts: a model call renders only the events after the closed turns it kept, and sends
exactly what `render` gives, in the neutral request and in every API's wire shape."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from agentq.core.compaction import find_cut, request_tokens
from agentq.core.events import Event, Summary
from agentq.core.render import render
from agentq.core.request import ToolSpec
from agentq.core.responses_wire import to_responses
from agentq.core.transcript import Transcript, render_after
from agentq.core.wire import to_anthropic, to_openai
from tests.support.clock import T0
from tests.core import builders as b
from tests.core.strategies import conversation_logs

WEATHER = ToolSpec("get_weather", "Current weather.", {"type": "object", "properties": {}})
APPROVE = ToolSpec("approve", "Ask a person.", {"type": "object", "properties": {}})
THINKING = {"provider": "anthropic", "index": 0,
            "item": {"type": "thinking", "thinking": "hmm", "signature": "sig"}}
REASONING = {"provider": "openai_responses",
             "item": {"type": "reasoning", "id": "rs_1", "encrypted_content": "x", "summary": []}}
IMAGE = {"type": "image", "url": "https://example.com/a.png"}


def shapes(request) -> tuple:
    """What is sent: the neutral request and its three wire shapes, and its token estimate."""
    return request, to_openai(request), to_anthropic(request), to_responses(request), \
        request_tokens(request)


def assert_each_step_renders_as_render_does(steps) -> Transcript | None:
    """Feed views to one kept transcript as a worker would; each request is render's."""
    kept = None
    for view, tools in steps:
        request, kept = render_after(kept, view, tools)
        assert shapes(request) == shapes(render(view, tools))
    return kept


def _summary(events: tuple[Event, ...], number: int) -> Summary | None:
    cut = find_cut(events, min_keep_turns=1)
    if cut is None:
        return None
    return Summary(f"s{number}", b.CID, 1, cut - 1, {"text": f"summary {number}"}, number, T0)


def _decorated(events: tuple[Event, ...], draw) -> tuple[Event, ...]:
    """Some answers with thinking or reasoning items, some messages with an image."""
    out = []
    for event in events:
        content = event.content
        if event.type == "assistant_msg" and draw(st.booleans()):
            content = {**content, "reasoning": [draw(st.sampled_from([THINKING, REASONING]))]}
        if event.type == "user_msg" and draw(st.integers(0, 4)) == 0:
            content = {**content, "parts": [{"type": "text", "text": content["text"]}, IMAGE]}
        out.append(replace(event, content=content))
    return tuple(out)


@st.composite
def growing_views(draw, logs=conversation_logs(max_turns=5)):
    """The views a worker sees as one log grows: after each event, sometimes under a new
    summary, with the settings (system prompt, model, tools) changed now and then."""
    events = _decorated(draw(logs), draw)
    summary, steps = None, []
    for end in range(1, len(events) + 1):
        if draw(st.integers(0, 5)) == 0:
            summary = _summary(events[:end], end) or summary
        after = summary.to_seq if summary else 0
        kept = tuple(e for e in events[:end] if e.seq > after)
        system = draw(st.sampled_from(["", "Be brief.", "Be kind."]))
        tools = draw(st.sampled_from([(), (WEATHER,), (WEATHER, APPROVE)]))
        model = draw(st.sampled_from([None, "m"]))
        view = b.view(kept, summary=summary, system=system, model=model)
        steps.append((view, tools))
    return steps


@settings(max_examples=100, deadline=None)
@given(growing_views())
def test_every_step_of_a_growing_log_sends_what_render_sends(steps):
    assert_each_step_renders_as_render_does(steps)


ANY_EVENT = st.one_of(
    st.builds(b.user, st.sampled_from(["hi", "", " "])),
    st.builds(b.assistant, st.sampled_from(["", "ok", " "]), round=st.sampled_from(["r1", "r2"]),
              interrupted=st.booleans()),
    st.builds(b.call, st.sampled_from(["c1", "c2", "c3"]), round=st.sampled_from(["r1", "r2"])),
    st.builds(b.result, st.sampled_from(["c1", "c2", "c3"]),
              st.sampled_from(["ok", "error", "cancelled"])),
    st.builds(b.suspension, st.just("c1")),
    st.builds(b.error),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(ANY_EVENT, min_size=1, max_size=30))
def test_a_log_that_breaks_every_rule_still_sends_what_render_sends(drafts):
    """Results before their calls or turns after them, repeated ids, rounds split by turns:
    never written by agentq, and rendered exactly as render does all the same."""
    events = b.log(*drafts)
    assert_each_step_renders_as_render_does(
        [(b.view(events[:end]), (WEATHER,)) for end in range(1, len(events) + 1)])


def turns(count: int, start_seq: int = 1) -> tuple[Event, ...]:
    drafts = []
    for number in range(count):
        drafts += [b.user(f"q{number}"), b.assistant("", round=f"a{number}"),
                   b.call(f"c{number}", round=f"a{number}"), b.result(f"c{number}"),
                   b.assistant("done", round=f"b{number}")]
    return b.log(*drafts, start_seq=start_seq)


def test_the_closed_turns_are_rendered_once_and_kept():
    events = turns(3)
    first, kept = render_after(None, b.view(events[:11]))
    assert kept.through_seq == 10  # up to the current turn's user_msg
    second, again = render_after(kept, b.view(events[:13]))
    assert again is kept  # the current turn grew; the closed turns are the same
    assert all(new is old for new, old in zip(second.messages, kept.messages))
    assert second == render(b.view(events[:13]))


def test_a_result_that_answers_an_earlier_turns_call_renders_the_view_from_its_start():
    events = b.log(b.user("q"), b.call("c1", round="r1"), b.user("next"), b.result("c1"))
    _, kept = render_after(None, b.view(events[:3]))
    assert "c1" in kept.unanswered
    request, _ = render_after(kept, b.view(events))
    assert request == render(b.view(events))


def test_another_conversations_or_another_logs_transcript_is_never_used():
    events = turns(3)
    _, kept = render_after(None, b.view(events))
    other_log = tuple(replace(e, id=f"x{e.seq}") for e in events)
    fork = replace(b.view(events[:8]), conversation_id="conv-2")
    for view in (b.view(other_log), fork, b.view(events[:6])):
        request, again = render_after(kept, view)
        assert request == render(view) and again is not kept


def test_a_new_summary_starts_a_new_transcript():
    events = turns(4)
    _, kept = render_after(None, b.view(events[:16]))
    summary = b.summary(10, "two turns")
    view = b.view(events[10:], summary=summary)
    request, again = render_after(kept, view)
    assert request == render(view)
    assert again.summary == summary and again.first_seq == 11
