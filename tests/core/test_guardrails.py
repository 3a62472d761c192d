"""The pure side of guardrails and instructions: keys, verdict drafts, the fold, `agentq check`'s rule."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentq.core.decide import Stopped, decide
from agentq.core.events import EventDraft
from agentq.core.fsm import fold
from agentq.core.guardrails import (
    GUARDRAIL_TRIPPED,
    Verdict,
    digest,
    first_round,
    guardrail_key,
    input_text,
    instructions_record,
    verdict_drafts,
    verdicts_once,
)
from agentq.core.settings import Settings
from tests.core.builders import CID, assistant, log, user, view
from tests.support.clock import T0


def _verdict(tripped: bool, name: str = "no_pii", key: str = "k1") -> list[EventDraft]:
    return verdict_drafts(Verdict(name, "input", tripped, {"why": "x"} if tripped else None),
                          step_key=key, turn_id="t1", created_at=T0)


def test_a_guardrail_run_has_one_key_per_phase_name_and_place_in_the_log():
    key = guardrail_key(CID, "input", "no_pii", 4)
    assert key == guardrail_key(CID, "input", "no_pii", 4)
    others = {guardrail_key(CID, "output", "no_pii", 4), guardrail_key(CID, "input", "other", 4),
              guardrail_key(CID, "input", "no_pii", 5), guardrail_key("conv-2", "input", "no_pii", 4)}
    assert key not in others and len(others) == 4


def test_a_passing_verdict_is_one_event_that_leaves_the_state_as_it_was():
    events = log(user("hi"), *_verdict(False))
    assert [e.type for e in events] == ["user_msg", "guardrail"]
    assert fold(events).state == fold(events[:1]).state == "running"


def test_a_tripped_verdict_fails_the_turn_with_an_error_naming_the_guardrail():
    events = log(user("hi"), *_verdict(True))
    error = events[-1]
    assert error.type == "error" and error.content["code"] == GUARDRAIL_TRIPPED
    assert error.content["details"] == {"guardrail": "no_pii", "phase": "input", "info": {"why": "x"}}
    assert fold(events).state == "failed"
    assert decide(view(events)) == Stopped(f"failed: {GUARDRAIL_TRIPPED}")


def test_input_guardrails_are_due_only_before_the_turns_first_answer():
    assert first_round(log(user("hello")))
    assert not first_round(log(user("hello"), assistant("hi")))
    assert not first_round(())
    assert input_text(log(user("hello"))) == "hello"


def test_check_finds_a_verdict_recorded_twice():
    events = log(user("hi"), *_verdict(False), *_verdict(False))
    assert [problem for _, problem in verdicts_once(events)] == [
        "guardrail run k1 has two verdicts"]


def test_check_finds_a_trip_that_did_not_fail_its_turn():
    events = log(user("hi"), _verdict(True)[0], assistant("leaked"))
    assert len(list(verdicts_once(events))) == 1
    assert list(verdicts_once(log(user("hi"), *_verdict(True)))) == []


def test_the_first_answer_records_the_instructions_text_and_later_ones_only_their_digest():
    first = instructions_record(log(user("hi")), "for_user", "Help ada.")
    assert first == {"name": "for_user", "digest": digest("Help ada."), "text": "Help ada."}
    said = EventDraft("assistant_msg", {"text": "", "instructions": first}, T0, round_id="r1")
    assert instructions_record(log(user("hi"), said), "for_user", "Help ada.") == {
        "name": "for_user", "digest": digest("Help ada.")}
    changed = instructions_record(log(user("hi"), said), "for_user", "Help the system.")
    assert changed["text"] == "Help the system."


def test_settings_name_guardrails_by_name_or_with_parallel():
    settings = Settings.model_validate({"input_guardrails": ["a", {"name": "b", "parallel": True}]})
    assert [(r.name, r.parallel) for r in settings.input_guardrails or ()] == [("a", False), ("b", True)]


@pytest.mark.parametrize("bad", [
    {"output_guardrails": [{"name": "a", "parallel": True}]},
    {"input_guardrails": ["not a name!"]},
    {"input_guardrails": [{"name": "a", "code": "import os"}]},
    {"instructions": "../etc"},
])
def test_settings_refuse_guardrails_that_cannot_be(bad):
    with pytest.raises(ValidationError):
        Settings.model_validate(bad)
