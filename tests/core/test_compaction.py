"""find_cut: summaries end at a turn boundary, never inside a turn (docs/design.md §16.2)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core import builders as b
from agentq.core.compaction import (
    CALL_OVERHEAD_TOKENS, MESSAGE_OVERHEAD_TOKENS, REQUEST_OVERHEAD_TOKENS, TOOL_OVERHEAD_TOKENS,
    compaction_cut, estimate_tokens, event_tokens, find_cut, request_tokens, wire_tokens,
)
from agentq.core.request import CallRef, Message, Request, ToolSpec
from tests.core.strategies import conversation_logs


def turns(count: int, calls_per_turn: int = 0):
    """`count` answered turns, each with one round of `calls_per_turn` server calls."""
    drafts = []
    for number in range(count):
        drafts.append(b.user(f"q{number}"))
        if calls_per_turn:
            drafts.append(b.assistant(round=f"r{number}"))
            ids = [f"c{number}_{i}" for i in range(calls_per_turn)]
            drafts += [b.call(i, round=f"r{number}") for i in ids]
            drafts += [b.result(i, output="x" * 40) for i in ids]
        drafts.append(b.assistant(f"answer {number}", round=f"f{number}"))
    return b.log(*drafts)


def test_estimate_tokens_is_the_ceiling_of_a_quarter_of_the_length():
    assert [estimate_tokens(t) for t in ("", "a", "abcd", "abcde")] == [0, 1, 1, 2]


def test_request_tokens_counts_system_messages_calls_and_tools():
    request = Request(
        system="abcd",
        messages=(
            Message("user", "abcdefgh"),
            Message("assistant", tool_calls=(CallRef("c1", "ab", {}),)),
        ),
        tools=(ToolSpec("t", "d", {}),),
    )
    system = REQUEST_OVERHEAD_TOKENS + 2  # '"abcd"' is six characters as sent
    user = MESSAGE_OVERHEAD_TOKENS + 3
    call = MESSAGE_OVERHEAD_TOKENS + 1 + CALL_OVERHEAD_TOKENS + 1 + 1 + 1  # text, id, name, {}
    tool = TOOL_OVERHEAD_TOKENS + 1 + 1 + 1
    assert request_tokens(request) == system + user + call + tool


def test_a_text_counts_as_sent_in_json_with_its_quotes_and_escapes():
    assert [wire_tokens(t) for t in ("", "ab", "abc", "a\nb", "\x01")] == [1, 1, 2, 2, 2]


def test_the_cut_keeps_exactly_min_keep_turns_short_turns_at_a_user_message():
    events = turns(4)
    assert find_cut(events, min_keep_turns=2) == 5


def test_there_is_no_cut_with_fewer_than_min_keep_turns_plus_one_turns():
    assert find_cut(turns(2), min_keep_turns=2) is None


def test_a_cut_at_the_first_event_is_no_cut():
    assert find_cut(turns(1, calls_per_turn=3), min_keep_turns=1) is None


def test_min_keep_turns_below_one_is_refused():
    with pytest.raises(ValueError):
        find_cut(turns(3), min_keep_turns=0)


def test_keep_tokens_keeps_more_whole_turns_while_they_fit():
    events = turns(5)
    per_turn = sum(event_tokens(e) for e in events[:2])
    assert find_cut(events, min_keep_turns=1, keep_tokens=3 * per_turn) == events[4].seq


def test_keep_tokens_never_keeps_fewer_than_min_keep_turns():
    assert find_cut(turns(5), min_keep_turns=3, keep_tokens=1) == 5


def test_keep_tokens_always_leaves_something_to_summarize():
    assert find_cut(turns(5), min_keep_turns=1, keep_tokens=10**9) == 3


def test_compaction_cut_never_orphans_a_tool_result_seed_001():
    # docs/design.md §16.2: a tail of 4 messages split a ten-tool turn from its results.
    events = turns(3, calls_per_turn=10)  # 23 events per turn
    cut = find_cut(events, min_keep_turns=1)
    assert cut == events[-23].seq and events[-23].type == "user_msg"
    kept = [e for e in events if e.seq >= cut]
    assert len(kept) == 23  # the whole last turn: min_keep_turns is a minimum, never a count


@settings(max_examples=200, deadline=None)
@given(conversation_logs(max_turns=6), st.integers(1, 3), st.none() | st.integers(0, 3000))
def test_every_cut_leaves_each_tool_call_and_its_result_on_the_same_side(
    events, min_keep, keep_tokens
):
    cut = find_cut(events, min_keep_turns=min_keep, keep_tokens=keep_tokens)
    if cut is None:
        return
    call_seq = {e.content["tool_call_id"]: e.seq for e in events if e.type == "tool_call"}
    for result in (e for e in events if e.type == "tool_result"):
        assert (call_seq[result.content["tool_call_id"]] < cut) == (result.seq < cut)


@settings(max_examples=200, deadline=None)
@given(conversation_logs(max_turns=6), st.integers(1, 3), st.none() | st.integers(0, 3000))
def test_every_cut_is_at_a_user_message_and_keeps_at_least_min_keep_turns(
    events, min_keep, keep_tokens
):
    cut = find_cut(events, min_keep_turns=min_keep, keep_tokens=keep_tokens)
    if cut is None:
        assert sum(e.type == "user_msg" for e in events) < min_keep + 1
        return
    at = next(e for e in events if e.seq == cut)
    assert at.type == "user_msg" and at is not events[0]
    assert sum(e.type == "user_msg" and e.seq >= cut for e in events) >= min_keep


def test_min_keep_turns_gives_way_when_those_turns_alone_pass_half_the_budget():
    # Two turns of ten long results each: keeping both would leave the context over budget.
    events = turns(3, calls_per_turn=10)
    per_turn = sum(event_tokens(e) for e in events[:23])
    view = b.view(events, compaction={"max_context_tokens": per_turn + 10, "min_keep_turns": 2})
    cut = compaction_cut(view, context_tokens=3 * per_turn)
    assert cut == events[-23].seq  # down to the current turn, still at a user_msg


def test_a_forced_cut_keeps_only_the_current_turn():
    events = turns(4)
    view = b.view(events, compaction={"min_keep_turns": 3})
    assert compaction_cut(view, context_tokens=0, force=True) == events[-2].seq
    assert compaction_cut(b.view(turns(1)), context_tokens=0, force=True) is None
