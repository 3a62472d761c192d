"""The timeline fold on plain values: attempts, waits, calls and events it has no bar for."""
from __future__ import annotations

from datetime import timedelta

from agentq.core.events import Event, ToolCallRecord
from agentq.core.timeline import StepRow, timeline
from tests.support.clock import T0


def at(seconds: float):
    return T0 + timedelta(seconds=seconds)


def event(seq: int, kind: str, content: dict, seconds: float) -> Event:
    return Event(f"e{seq}", "c1", seq, kind, "t1", "r1", None, content, at(seconds))  # type: ignore[arg-type]


def step(**changes) -> StepRow:
    values = dict(step_key="k1", kind="llm", ref={"after_seq": 1}, status="succeeded", attempts=1,
                  retries=0, faults=0, deaths=0, worker="w1", lease_until=None, last_error=None,
                  created_at=at(0), started_at=at(2), finished_at=at(3),
                  attempt_log=[{"worker": "w1", "claimed_at": "2026-01-01T00:00:02Z",
                                "after": "waiting"}])
    return StepRow(**{**values, **changes})


def test_a_step_first_claimed_from_waiting_shows_its_wait_for_a_slot():
    drawn = timeline("c1", "t1", [event(1, "user_msg", {"text": "hi"}, 0)],
                     [step(created_at=at(0))], [], [], now=at(5), running=False)
    [bar] = drawn.steps
    assert [(w.kind, w.start, w.end) for w in bar.waits] == [("slot", at(0), bar.attempts[0].claimed_at)]
    assert bar.attempts[0].outcome == "done"


def test_a_step_waiting_for_a_slot_still_shows_an_open_wait_and_no_attempt():
    drawn = timeline("c1", "t1", [event(1, "user_msg", {}, 0)],
                     [step(status="waiting", attempts=0, started_at=None, finished_at=None,
                           attempt_log=[])], [], [], now=at(5), running=True)
    [bar] = drawn.steps
    assert bar.attempts == [] and [(w.kind, w.end) for w in bar.waits] == [("slot", None)]
    assert drawn.ended_at is None


def test_a_running_step_whose_lease_ran_out_shows_its_attempt_died():
    running = step(status="running", finished_at=None, lease_until=at(4))
    [bar] = timeline("c1", "t1", [event(1, "user_msg", {}, 0)], [running], [], [],
                     now=at(5), running=True).steps
    assert [a.outcome for a in bar.attempts] == ["died"]


def test_a_human_call_is_a_wait_for_a_person_until_it_is_resolved():
    call = ToolCallRecord("c1", "call1", "approve", "human", "resolved", {}, "r1", "t1", at(1),
                          resolved_at=at(4))
    [bar] = timeline("c1", "t1", [event(1, "user_msg", {}, 0)], [], [call], [],
                     now=at(5), running=False).calls
    assert [(w.kind, w.start, w.end) for w in bar.waits] == [("person", at(1), at(4))]


def test_events_of_kinds_without_a_bar_are_kept_as_marks_with_their_content():
    events = [event(1, "user_msg", {"text": "hi"}, 0), event(2, "handoff", {"to": "billing"}, 1),
              event(3, "assistant_msg", {"text": "ok", "usage": {"output_tokens": 2},
                                         "cost_nanos": 500_000_000}, 2)]
    drawn = timeline("c1", "t1", events, [], [], [], now=at(5), running=False)
    assert [(m.type, m.content) for m in drawn.marks] == [("user_msg", {"text": "hi"}),
                                                          ("handoff", {"to": "billing"})]
    assert [(m.usage, m.cost) for m in drawn.model_calls] == [({"output_tokens": 2}, "0.500000000")]
