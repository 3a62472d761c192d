"""The state machine: what each event does to the cached state, and fold over batches."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core import builders as b
from agentq.core.events import FsmState
from agentq.core.fsm import apply, fold, round_closed
from tests.core.strategies import conversation_logs


def state_after(*drafts) -> FsmState:
    return fold(b.log(*drafts))


def test_a_user_message_starts_a_running_turn():
    state = state_after(b.user("hi"))
    assert (state.state, state.turn_id, state.last_seq) == ("running", "t1", 1)


def test_every_event_moves_last_seq():
    events = b.log(b.user(), b.assistant("x"), b.error(status="failed_recoverable"))
    assert [apply(FsmState(), e).last_seq for e in events] == [1, 2, 3]


def test_an_answer_without_tool_calls_leaves_the_conversation_idle():
    state = state_after(b.user(), b.assistant("hello", round="r1"))
    assert (state.state, state.rounds) == ("idle", 1)


def test_a_server_tool_call_makes_the_turn_running():
    state = state_after(b.user(), b.assistant(round="r1"), b.call("c1", round="r1"))
    assert (state.state, state.running, state.pending) == ("running", ("c1",), {})


def test_a_human_tool_call_alone_awaits_input():
    state = state_after(
        b.user(),
        b.assistant(round="r1"),
        b.call(
            "h1",
            name="approve",
            round="r1",
            executor="human",
            expires_at="2026-11-22T00:00:00.000000Z",
        ),
    )
    assert state.state == "awaiting_input"
    assert state.pending == {
        "h1": {"executor": "human", "name": "approve", "expires_at": "2026-11-22T00:00:00.000000Z"}
    }


def test_a_human_call_beside_a_running_server_call_stays_running():
    state = state_after(
        b.user(),
        b.assistant(round="r1"),
        b.call("c1", round="r1"),
        b.call("h1", round="r1", executor="client"),
    )
    assert (state.state, state.running, list(state.pending)) == ("running", ("c1",), ["h1"])


def test_the_last_server_result_with_a_pending_call_open_awaits_input():
    state = state_after(
        b.user(),
        b.assistant(round="r1"),
        b.call("c1", round="r1"),
        b.call("h1", round="r1", executor="human"),
        b.result("c1"),
    )
    assert (state.state, state.running, list(state.pending)) == ("awaiting_input", (), ["h1"])


def test_the_last_result_of_a_round_makes_the_turn_running_again():
    state = state_after(
        b.user(),
        b.assistant(round="r1"),
        b.call("h1", round="r1", executor="human"),
        b.resolution("h1"),
        b.result("h1"),
    )
    assert (state.state, state.pending) == ("running", {})


def test_a_suspension_awaits_input_only_when_nothing_runs():
    waiting = state_after(
        b.user(),
        b.assistant(round="r1"),
        b.call("h1", round="r1", executor="human"),
        b.suspension("h1"),
    )
    busy = state_after(
        b.user(),
        b.assistant(round="r1"),
        b.call("c1", round="r1"),
        b.call("h1", round="r1", executor="human"),
        b.suspension("h1"),
    )
    assert (waiting.state, busy.state) == ("awaiting_input", "running")


def test_an_interrupted_turn_stays_idle_after_its_cancelled_results():
    state = state_after(
        b.user(),
        b.assistant(round="r1"),
        b.call("c1", round="r1"),
        b.call("h1", round="r1", executor="human"),
        b.assistant("partial", round="r2", interrupted=True),
        b.result("c1", "cancelled", None),
        b.result("h1", "cancelled", None),
    )
    assert (state.state, state.running, state.pending, state.rounds) == ("idle", (), {}, 2)


def test_a_permanent_error_fails_the_turn_but_keeps_its_pending_calls():
    state = state_after(
        b.user(),
        b.assistant(round="r1"),
        b.call("c1", round="r1"),
        b.call("h1", round="r1", executor="human"),
        b.error(status="timeout"),
    )
    assert (state.state, state.running, list(state.pending)) == ("failed", (), ["h1"])


def test_a_recoverable_error_leaves_the_state_alone():
    state = state_after(b.user(), b.error(status="failed_recoverable"))
    assert state.state == "running"


def test_a_user_message_after_a_failure_starts_a_new_running_turn():
    state = state_after(b.user(), b.error(), b.user("again"))
    assert (state.state, state.turn_id) == ("running", "t3")


def test_apply_never_mutates_the_state_it_is_given():
    before = state_after(
        b.user(), b.assistant(round="r1"), b.call("h1", round="r1", executor="human")
    )
    snapshot = before.to_json()
    apply(before, b.log(b.result("h1"), start_seq=4)[0])
    assert before.to_json() == snapshot


@settings(max_examples=200, deadline=None)
@given(conversation_logs(), st.data())
def test_folding_in_batches_from_the_cached_state_equals_folding_the_whole_log(events, data):
    cuts = sorted(data.draw(st.lists(st.integers(0, len(events)), max_size=6)))
    state = FsmState()
    for start, end in zip([0] + cuts, cuts + [len(events)], strict=True):
        state = FsmState.from_json(fold(events[start:end], state).to_json())  # the row's JSON cache
    assert state == fold(events)


def test_a_round_is_closed_only_when_its_last_open_call_has_a_result():
    opened = [b.user(), b.assistant("", round="r1"), b.call("c1", round="r1"),
              b.call("c2", round="r1", executor="human")]
    assert not round_closed(state_after(*opened))
    assert not round_closed(state_after(*opened, b.result("c1")))
    assert round_closed(state_after(*opened, b.result("c1"), b.result("c2")))
    assert not round_closed(state_after(b.user(), b.assistant("done")))  # the turn is over
