"""Prompt caching: Anthropic breakpoints placed automatically, cached tokens in usage.

The Anthropic emulator models the cache as the API documents it (tests/support/emulators/
anthropic_cache.py names the rules); bench/prompt_cache.py prints the share of a 20-turn
conversation's input read from cache, which this test holds above a floor.
"""
from __future__ import annotations

import copy

import pytest

from agentq.core.render import render
from agentq.core.wire import to_anthropic
from agentq.providers.anthropic import messages_body
from agentq.providers.prompt_cache import with_breakpoints
from bench.prompt_cache import cache_usage, read_share
from tests.support.emulators.kit import WEATHER, Kit, running
from tests.support.emulators.shapes import SHAPES


def _marks(body: dict) -> list[str]:
    found = ["tools"] * sum("cache_control" in t for t in body.get("tools") or ())
    found += ["system"] * sum("cache_control" in b for b in body.get("system") or () if isinstance(b, dict))
    for index, message in enumerate(body["messages"]):
        content = message["content"] if isinstance(message["content"], list) else []
        found += [f"messages.{index}"] * sum("cache_control" in b for b in content)
    return found


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_shape_gets_at_most_four_breakpoints_on_its_stable_prefix(shape):
    view = SHAPES[shape]
    body = messages_body(render(view, [WEATHER]), view.settings)
    marks = _marks(body)
    last = f"messages.{len(body['messages']) - 1}"
    assert len(marks) <= 4 and marks[0] == "tools" and marks[-1] == last
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}


def test_breakpoints_go_on_tools_system_the_last_message_and_the_user_message_before():
    body = {"model": "m", "system": "Be brief.", "tools": [{"name": "a"}, {"name": "b"}], "messages": [
        {"role": "user", "content": "q1"}, {"role": "assistant", "content": [{"type": "text", "text": "a1"}]},
        {"role": "user", "content": "q2"}, {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "t", "signature": "s"},
            {"type": "tool_use", "id": "c", "name": "a", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c", "content": "ok"}]}]}
    marked = with_breakpoints(body)
    assert _marks(marked) == ["tools", "system", "messages.2", "messages.4"]
    assert "cache_control" not in marked["tools"][0] and "cache_control" not in body["tools"][-1]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_breakpoints_leave_the_body_and_the_shapes_of_its_messages_as_they_were(shape):
    view = SHAPES[shape]
    request = render(view, [WEATHER])
    plain = to_anthropic(request)  # its blocks are each message's own, made once and shared
    before = copy.deepcopy(plain)
    marked = with_breakpoints(plain)
    assert plain == before and to_anthropic(request) == before
    assert messages_body(request, view.settings) == messages_body(render(view, [WEATHER]),
                                                                  view.settings)
    assert _marks(marked)


@pytest.mark.parametrize("kind, floor", [("anthropic", 0.8), ("openai", 0.8)])
def test_a_twenty_turn_conversation_reads_most_of_its_input_from_cache(kind, floor, sqlite_store):
    with running(kind) as emulator:
        totals = cache_usage(Kit(kind, emulator), sqlite_store, turns=20)
        assert not emulator.refused
    share = read_share(totals, kind)
    print(f"{kind}: {share:.1%} of 20 turns' input tokens read from cache ({totals})")
    assert share >= floor
    if kind == "anthropic":
        assert totals["cache_creation_input_tokens"] > 0


def test_the_emulator_refuses_a_fifth_breakpoint():
    import httpx2

    with running("anthropic") as emulator:
        block = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
        body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": [block] * 5}]}
        headers = {"x-api-key": emulator.api_key, "anthropic-version": "2023-06-01"}
        response = httpx2.post(emulator.base_url + "/v1/messages", json=body, headers=headers)
    assert response.status_code == 400
    assert "A maximum of 4 blocks with cache_control may be provided. Found 5." in response.text
