"""decide(view): the next step of a conversation, from its log alone."""

from __future__ import annotations

import random

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core import builders as b
from agentq.core.decide import (
    AwaitInput,
    CallModel,
    FailTurn,
    Idle,
    RunTools,
    StartTurn,
    Step,
    Stopped,
    message_action,
    decide,
)
from agentq.core.fsm import fold
from agentq.core.keys import round_id, step_key
from tests.core.strategies import conversation_logs

EXPIRES = "2026-11-22T00:00:00.000000Z"


def decide_log(*drafts, **view_args):
    return decide(b.view(b.log(*drafts), **view_args))


def test_an_empty_conversation_is_idle():
    assert decide(b.view()) == Idle()


def test_an_empty_conversation_with_a_queued_message_starts_a_turn_with_it():
    item = b.inbox_item()
    assert decide(b.view(inbox=(item,))) == StartTurn(item)


def test_an_ended_conversation_is_stopped():
    assert decide_log(b.user(), status="ended") == Stopped("ended")


def test_a_new_user_message_needs_the_model_after_its_seq():
    assert decide_log(b.user("hi")) == CallModel(Step.model(b.CID, 1))


def test_an_llm_step_carries_the_round_id_minted_from_its_key():
    step = Step.model(b.CID, 7)
    assert step.key == step_key(b.CID, "llm", {"after_seq": 7})
    assert step.round_id == round_id(step.key)
    assert Step.tool(b.CID, "c1").round_id is None


def test_an_answered_turn_is_idle():
    assert decide_log(b.user(), b.assistant("hello")) == Idle()


def test_an_answered_turn_starts_the_first_queued_message_in_arrival_order():
    first, second = b.inbox_item("a", "m1"), b.inbox_item("b", "m2")
    assert decide_log(b.user(), b.assistant("hello"), inbox=(first, second)) == StartTurn(first)


def test_a_running_turn_does_not_start_a_queued_message():
    assert decide_log(b.user(), inbox=(b.inbox_item(),)) == CallModel(Step.model(b.CID, 1))


def test_open_server_calls_run_as_one_tool_step_each_in_call_order():
    decision = decide_log(
        b.user(), b.assistant(round="r1"), b.call("c2", round="r1"), b.call("c1", round="r1")
    )
    assert decision == RunTools((Step.tool(b.CID, "c2"), Step.tool(b.CID, "c1")))


def test_server_calls_run_before_pending_human_calls_are_awaited():
    decision = decide_log(
        b.user(),
        b.assistant(round="r1"),
        b.call("h1", round="r1", executor="human"),
        b.call("c1", round="r1"),
    )
    assert decision == RunTools((Step.tool(b.CID, "c1"),))


def test_only_pending_calls_open_awaits_input_with_one_expiry_per_deadline():
    decision = decide_log(
        b.user(),
        b.assistant(round="r1"),
        b.call("h1", round="r1", executor="human", expires_at=EXPIRES),
        b.call("k1", round="r1", executor="client"),
        b.suspension("h1", "k1"),
    )
    assert decision == AwaitInput((Step.expire(b.CID, "h1"),), ("h1", "k1"))


def test_a_round_with_every_result_in_needs_the_model_again():
    decision = decide_log(
        b.user(), b.assistant(round="r1"), b.call("c1", round="r1"), b.result("c1")
    )
    assert decision == CallModel(Step.model(b.CID, 4))


def test_results_in_any_order_close_the_round():
    decision = decide_log(
        b.user(),
        b.assistant(round="r1"),
        b.call("c1", round="r1"),
        b.call("c2", round="r1"),
        b.result("c2"),
        b.result("c1", "error", "boom"),
    )
    assert decision == CallModel(Step.model(b.CID, 6))


def test_an_interrupted_turn_with_cancelled_results_is_over():
    decision = decide_log(
        b.user(),
        b.assistant(round="r1"),
        b.call("c1", round="r1"),
        b.assistant("par", round="r2", interrupted=True),
        b.result("c1", "cancelled", None),
        inbox=(b.inbox_item(),),
    )
    assert decision == StartTurn(b.inbox_item())


def test_a_turn_ending_in_a_permanent_error_is_stopped_even_with_a_queued_message():
    decision = decide_log(
        b.user(), b.error("provider_error", "failed_permanent"), inbox=(b.inbox_item(),)
    )
    assert decision == Stopped("failed: provider_error")


def test_a_recoverable_error_does_not_stop_the_turn():
    assert decide_log(b.user(), b.error(status="failed_recoverable")) == CallModel(
        Step.model(b.CID, 2)
    )


def test_an_event_after_a_permanent_error_lets_the_turn_go_on():
    decision = decide_log(
        b.user(),
        b.assistant(round="r1"),
        b.call("h1", round="r1", executor="human"),
        b.error(status="timeout"),
        b.resolution("h1"),
        b.result("h1"),
    )
    assert decision == CallModel(Step.model(b.CID, 6))


def test_a_turn_that_used_its_round_budget_fails_instead_of_calling_the_model():
    decision = decide_log(
        b.user(),
        b.assistant(round="r1"),
        b.call("c1", round="r1"),
        b.result("c1"),
        b.assistant(round="r2"),
        b.call("c2", round="r2"),
        b.result("c2"),
        limits={"max_rounds_per_turn": 2},
    )
    assert isinstance(decision, FailTurn) and decision.code == "round_limit"


def test_the_round_budget_counts_only_the_current_turn():
    decision = decide_log(
        b.user(), b.assistant("a", round="r1"), b.user(), limits={"max_rounds_per_turn": 1}
    )
    assert decision == CallModel(Step.model(b.CID, 3))


def test_resume_with_open_tool_calls_dispatches_them_without_re_rolling_the_model():
    # inv. 4: a worker died after committing the round; the log ends in calls without results.
    events = b.log(
        b.user(),
        b.assistant("Let me check.", round="r1"),
        b.call("c1", round="r1"),
        b.call("c2", round="r1"),
        b.call("h1", round="r1", executor="human"),
        b.result("c2"),
    )
    first, again = decide(b.view(events)), decide(b.view(events))
    assert first == again == RunTools((Step.tool(b.CID, "c1"),))


def test_step_keys_do_not_collide_when_code_paths_diverge_seed_000():
    # docs/design.md §16.1: a counter shifted when another path ran first; a key names content.
    base = (
        b.user("hi"),
        b.assistant(round="r1"),
        b.call("c1", round="r1"),
        b.call("c2", round="r1"),
    )
    c2_done_first = decide_log(*base, b.result("c2"))
    c1_done_first = decide_log(*base, b.result("c1"))
    resumed = decide_log(*base)
    assert resumed.steps == (c2_done_first.steps[0], c1_done_first.steps[0])
    kinds = [
        Step.tool(b.CID, "c1"),
        Step.expire(b.CID, "c1"),
        Step.model(b.CID, 5),
        Step.compact(b.CID, 5),
    ]
    assert len({s.key for s in kinds}) == 4
    assert Step.tool("fork-of-conv-1", "c1").key != Step.tool(b.CID, "c1").key


def test_step_key_ignores_wall_clock_seed_000():
    drafts = (b.user("hi"), b.assistant(round="r1"), b.call("c1", round="r1"))
    early = b.log(*drafts, spacing_s=0.001)
    late = b.shifted(b.log(*drafts, spacing_s=3600), [86_400.0] * 3)
    assert decide(b.view(early)) == decide(b.view(late))


@settings(max_examples=200, deadline=None)
@given(conversation_logs(), st.integers(0, 2**32))
def test_decisions_and_step_keys_never_depend_on_event_timestamps(events, seed):
    rnd = random.Random(seed)
    shifts = [rnd.uniform(-1e6, 1e6) for _ in events]
    assert decide(b.view(b.shifted(events, shifts))) == decide(b.view(events))


@settings(max_examples=200, deadline=None)
@given(conversation_logs())
def test_a_log_ending_in_open_calls_is_never_re_rolled(events):
    answered = {e.content["tool_call_id"] for e in events if e.type == "tool_result"}
    open_calls = [
        e for e in events if e.type == "tool_call" and e.content["tool_call_id"] not in answered
    ]
    assert not (open_calls and isinstance(decide(b.view(events)), CallModel))


@settings(max_examples=200, deadline=None)
@given(conversation_logs())
def test_the_decision_agrees_with_the_folded_state(events):
    expected = {
        Idle: "idle",
        StartTurn: "idle",
        Stopped: "failed",
        RunTools: "running",
        CallModel: "running",
        FailTurn: "running",
        AwaitInput: "awaiting_input",
    }
    assert fold(events).state == expected[type(decide(b.view(events)))]


def test_an_idle_or_failed_conversation_appends_a_new_message():
    assert message_action("idle", "reject") == message_action("failed", "enqueue") == "append"


def test_a_busy_conversation_applies_the_message_on_busy_rule():
    assert [
        message_action(s, o)
        for s in ("running", "awaiting_input")
        for o in ("enqueue", "interrupt", "reject")
    ] == [
        "enqueue",
        "interrupt",
        "reject",
        "enqueue",
        "interrupt",
        "reject",
    ]


def test_an_ended_conversation_rejects_new_messages():
    assert message_action("ended", "enqueue") == "reject"


def test_an_unknown_on_busy_rule_is_refused():
    with pytest.raises(ValueError):
        message_action("running", "drop")
