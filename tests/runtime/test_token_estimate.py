"""The context budget's estimate against what a provider counts: never less, on every wire.

No tokenizer is used (tiktoken fetches its BPE files at first use, and no well-kept
offline tokenizer covers every provider), so the estimate is made conservative for the
whole request instead, measured here against the emulators' count of the JSON body
(four characters a token, tests/support/emulators/script.py), on generated logs of any shape.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from agentq.core.compaction import request_tokens
from agentq.core.render import render
from agentq.providers.anthropic import messages_body
from agentq.providers.openai_chat import chat_body
from agentq.providers.openai_responses import responses_body
from tests.support.emulators.script import estimate_tokens as counted_by_the_emulators
from tests.runtime.test_context_within_budget import TOOLS, views


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(views())
def test_the_estimate_is_never_below_what_any_wire_body_counts(view):
    request = render(view, TOOLS)
    chat = chat_body(request, view.settings)
    messages = messages_body(request, view.settings)
    responses = responses_body(request, view.settings)
    estimate = request_tokens(request)
    assert estimate >= counted_by_the_emulators([chat["messages"], chat.get("tools")])
    assert estimate >= counted_by_the_emulators(
        [messages.get("system"), messages["messages"], messages.get("tools")])
    assert estimate >= counted_by_the_emulators(
        [responses.get("instructions"), responses.get("input"), responses.get("tools")])


def test_a_budget_of_500_is_kept_by_the_whole_body_as_a_provider_counts_it():
    """The report behind this: with max_context_tokens 500, requests of about 1,230 tokens
    (the body / 4) were sent, since only the texts were counted."""
    from agentq.core.budget import plan_context
    from tests.core import builders as b

    long = "the weather in Oslo is cold and wet today, " * 40
    events = b.log(b.user(long), b.assistant(long, round="r1"), b.call("c1", round="r1"),
                   b.result("c1", "ok", long))  # one turn: nothing to summarize, all to shorten
    view = b.view(events, system="You answer questions about the weather. " * 10,
                  compaction={"max_context_tokens": 500, "min_keep_turns": 1})
    context = plan_context(view, TOOLS)
    assert context.cut is None and context.evictions
    body = chat_body(context.request, view.settings)
    assert counted_by_the_emulators([body["messages"], body.get("tools")]) <= 500
    anthropic = messages_body(context.request, view.settings)
    assert counted_by_the_emulators(
        [anthropic.get("system"), anthropic["messages"], anthropic.get("tools")]) <= 500


def test_without_a_budget_the_request_is_sent_whole_and_never_counted(monkeypatch):
    """Counting visits every message of the history, on every model call of a long
    conversation; with no max_context_tokens nothing is decided by it."""
    import agentq.core.budget as budget
    from tests.core import builders as b

    def counted(_request):
        raise AssertionError("the request was counted without a budget")

    monkeypatch.setattr(budget, "request_tokens", counted)
    long = "the weather in Oslo is cold and wet today, " * 40
    events = b.log(b.user(long), b.assistant(long, round="r1"), b.call("c1", round="r1"),
                   b.result("c1", "ok", long))
    view = b.view(events, system="You answer questions about the weather.")
    context = budget.plan_context(view, TOOLS)
    assert context.cut is None and context.evictions == ()
    assert context.request == render(view, TOOLS)
    with_budget = b.view(events, compaction={"max_context_tokens": 500, "min_keep_turns": 1})
    with pytest.raises(AssertionError, match="counted without a budget"):
        budget.plan_context(with_budget, TOOLS)  # a budget is checked against the count
