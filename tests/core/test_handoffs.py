"""Handoffs in the pure core: the transfer tools a model is offered, the fold that says
which agent holds a conversation, and the history its input filter shows that agent."""
from __future__ import annotations

from dataclasses import replace

import pytest
from pydantic import ValidationError

from agentq.core.fsm import fold
from agentq.core.handoff_targets import HandoffTarget, find_target, transfer_specs
from agentq.core.decide import ends_a_turn
from agentq.core.handoffs import (
    BY_MODEL,
    BY_PERSON,
    Handoff,
    between_turns,
    holder_name,
    seen_by_holder,
)
from agentq.core.render import render
from agentq.core.settings import Settings
from agentq.core.events import EventDraft
from tests.core import builders as b
from tests.support.clock import T0


def handoff(to: str, source: str | None = "a", *, settings: dict | None = None,
            input_filter: str = "all", by: str = BY_MODEL) -> EventDraft:
    return Handoff(source=source, target=to, version=1, why="theirs", by=by,
                   settings=settings if settings is not None else {"system": f"I am {to}."},
                   input_filter=input_filter).draft(created_at=T0)  # type: ignore[arg-type]


def transfer_round(to: str, call_id: str, round: str, **kwargs) -> tuple[EventDraft, ...]:
    return (b.assistant(round=round), b.call(call_id, name=f"transfer_to_{to}", round=round),
            b.result(call_id, output={"handed_off_to": to}), handoff(to, **kwargs))


def test_each_handoff_target_is_offered_as_a_transfer_tool_with_its_description():
    settings = Settings(handoffs=["billing", {"name": "tech.support", "description": "Fixes things."}])
    specs = transfer_specs(settings.handoffs)
    assert [s.name for s in specs] == ["transfer_to_billing", "transfer_to_tech_support"]
    assert specs[1].description.endswith("Fixes things.")
    assert specs[0].parameters["required"] == ["reason"]


def test_a_transfer_tool_is_found_only_among_the_declared_targets():
    targets = Settings(handoffs=["billing"]).handoffs
    assert find_target(targets, "transfer_to_billing") == HandoffTarget(name="billing")
    assert find_target(targets, "transfer_to_admin") is None
    assert find_target(None, "transfer_to_billing") is None


def test_a_transfer_tool_that_clashes_with_a_tool_is_refused():
    with pytest.raises(ValidationError, match="more than once"):
        Settings(tools=["transfer_to_billing"], handoffs=["billing"])
    with pytest.raises(ValidationError, match="more than once"):
        Settings(handoffs=["billing", {"name": "billing", "input_filter": "turn"}])


def test_an_unknown_input_filter_is_refused():
    with pytest.raises(ValidationError):
        Settings(handoffs=[{"name": "billing", "input_filter": "everything_but"}])


def test_without_a_handoff_the_agent_it_started_from_holds_the_conversation():
    state = fold(b.log(b.user(), b.assistant("hi")))
    assert state.agent is None and holder_name(state, "support") == "support"


def test_the_last_handoff_of_the_log_names_the_agent_that_holds_it():
    state = fold(b.log(b.user(), *transfer_round("b", "c1", "r1"),
                       *transfer_round("c", "c2", "r2", source="b")))
    assert holder_name(state, "a") == "c"
    assert state.agent["settings"] == {"system": "I am c."}
    assert state.state == "running"  # the round is closed: the holder's model speaks next


def test_the_holder_stays_across_turns_and_a_fold_in_batches_agrees():
    events = b.log(b.user(), *transfer_round("b", "c1", "r1"), b.assistant("done", round="r2"),
                   b.user("again"), b.assistant("ok", round="r3"))
    whole = fold(events)
    in_two = fold(events[5:], fold(events[:5]))
    assert whole == in_two and holder_name(whole, "a") == "b"


def test_a_handoff_back_to_the_starting_agent_runs_with_the_conversations_own_settings():
    back = Handoff(source="b", target="a", version=1, why="", by=BY_PERSON, settings=None)
    state = fold(b.log(b.user(), *transfer_round("b", "c1", "r1"), b.assistant("x", round="r2")))
    state = fold(b.log(back.draft(created_at=T0), start_seq=state.last_seq + 1), state)
    assert holder_name(state, "a") == "a" and state.agent["settings"] is None


def test_the_turn_filter_shows_the_target_the_turn_from_its_user_message():
    events = b.log(b.user("old question"), b.assistant("old answer", round="r0"),
                   b.user("refund?"), *transfer_round("b", "c1", "r1", input_filter="turn"))
    view = replace(b.view(events), fsm=fold(events))
    seen = render(seen_by_holder(view))
    assert [m.text for m in seen.messages if m.role == "user"] == ["refund?"]


def test_a_persons_handoff_with_the_turn_filter_shows_the_target_only_the_next_turn():
    events = b.log(b.user("old"), b.assistant("answer", round="r0"),
                   handoff("b", by=BY_PERSON, input_filter="turn"), b.user("new"))
    view = replace(b.view(events), fsm=fold(events))
    assert [e.seq for e in seen_by_holder(view).events] == [3, 4]


def test_the_no_tools_filter_hides_earlier_tool_calls_but_not_the_holders_own():
    events = b.log(b.user(), b.assistant(round="r0"), b.call("w1", round="r0"), b.result("w1"),
                   *transfer_round("b", "c1", "r1", input_filter="no_tools"),
                   b.assistant(round="r2"), b.call("w2", round="r2"), b.result("w2"))
    view = replace(b.view(events), fsm=fold(events))
    calls = [e.content["tool_call_id"] for e in seen_by_holder(view).events if e.type == "tool_call"]
    assert calls == ["w2"]


def test_the_all_filter_shows_everything_and_a_summary():
    events = b.log(b.user(), *transfer_round("b", "c1", "r1"), start_seq=5)
    view = replace(b.view(events, summary=b.summary(4)), fsm=fold(events))
    assert seen_by_holder(view) == view


def test_a_summary_of_what_the_filter_hides_is_not_shown():
    events = b.log(b.user(), *transfer_round("b", "c1", "r1", input_filter="turn"), start_seq=5)
    view = replace(b.view(events, summary=b.summary(4)), fsm=fold(events))
    assert seen_by_holder(view).summary is None


def test_a_handoff_event_has_an_exact_json_round_trip():
    made = Handoff(source="a", target="b", version=2, why="w", by=BY_PERSON, settings=None,
                   input_filter="turn", user="alice")
    assert Handoff.from_json(made.to_json()) == made


def test_a_turn_followed_by_a_persons_handoff_is_whole_but_one_before_a_models_is_not():
    by_person = b.log(b.user(), b.assistant("done"), handoff("b", by=BY_PERSON))
    assert ends_a_turn(by_person, 2) and between_turns(by_person[2])
    by_model = b.log(b.user(), *transfer_round("b", "c1", "r1"))
    assert not ends_a_turn(by_model, 4) and not between_turns(by_model[4])


def test_tool_choice_may_name_a_transfer_tool():
    settings = Settings(tools=[], handoffs=["billing"], tool_choice={"name": "transfer_to_billing"})
    assert settings.tool_choice.name == "transfer_to_billing"


def test_a_code_filter_sees_the_events_before_the_handoff_and_the_rest_stays():
    events = b.log(b.user("q"), b.assistant("thinking", round="r0"),
                   *transfer_round("b", "c1", "r1", input_filter="code:users_only"),
                   b.assistant("B here", round="r2"))
    view = replace(b.view(events), fsm=fold(events))
    given = []

    def users_only(before):
        given.extend(before)
        return [e for e in before if e.type == "user_msg"]

    seen = seen_by_holder(view, {"users_only": users_only}.get)
    assert [e.seq for e in given] == [1, 2, 3, 4, 5]
    assert [e.type for e in seen.events] == ["user_msg", "handoff", "assistant_msg"]


def test_a_code_filter_this_process_lacks_is_an_error_not_the_whole_history():
    events = b.log(b.user(), *transfer_round("b", "c1", "r1", input_filter="code:gone"))
    view = replace(b.view(events), fsm=fold(events))
    with pytest.raises(ValueError, match="'gone'"):
        seen_by_holder(view, {}.get)
