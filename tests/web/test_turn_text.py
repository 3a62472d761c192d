"""TurnText: what a turn stream sends of its rounds' text, whatever order the pieces come in."""
from __future__ import annotations

from datetime import UTC, datetime

from agentq.core.events import Event
from agentq.live.pubsub import Partial
from agentq.web.streaming.turn_text import TurnText

T = "turn-1"


def delta(index: int, text: str, *, attempt: int = 1, round_id: str = "r1", turn_id: str = T) -> dict:
    return {"round_id": round_id, "turn_id": turn_id, "index": index, "attempt": attempt, "text": text}


def answer(text: str, round_id: str = "r1") -> Event:
    return Event(id="e", conversation_id="c", seq=2, type="assistant_msg", turn_id=T,
                 round_id=round_id, step_key=None, content={"text": text, "interrupted": False},
                 created_at=datetime(2026, 1, 1, tzinfo=UTC))


def texts(frames: list[dict]) -> list[str]:
    return [f["text"] for f in frames]


def test_a_joining_stream_first_gets_the_text_so_far_then_only_newer_pieces():
    turn = TurnText(T, lambda turn_id: None)
    assert texts(turn.catch_up(Partial("r1", 1, 2, "abcdef"))) == ["abcdef"]
    assert turn.live(delta(2, "ef")) == []  # held by the text so far
    assert texts(turn.live(delta(3, "gh"))) == ["gh"]


def test_a_live_gap_reads_the_text_so_far_and_sends_what_was_missed():
    partial = Partial("r1", 1, 2, "ab" "cd" "ef")
    turn = TurnText(T, lambda turn_id: partial)
    assert texts(turn.live(delta(0, "ab"))) == ["ab"]
    assert texts(turn.live(delta(2, "ef"))) == ["cdef"]  # piece 1 was lost on the way
    assert texts(turn.live(delta(3, "gh"))) == ["gh"]


def test_deltas_of_another_turn_are_not_sent():
    turn = TurnText(T, lambda turn_id: None)
    assert turn.live(delta(0, "x", turn_id="turn-2")) == []


def test_the_end_of_a_round_sends_the_rest_of_its_text_and_later_pieces_are_dropped():
    turn = TurnText(T, lambda turn_id: None)
    turn.live(delta(0, "Hel"))
    assert texts(turn.ended(answer("Hello!"))) == ["lo!"]
    assert turn.live(delta(1, "lo!")) == []
    assert turn.catch_up(Partial("r1", 1, 1, "Hello!")) == []


def test_a_round_never_streamed_is_sent_whole_before_its_answer():
    turn = TurnText(T, lambda turn_id: None)
    (rest,) = turn.ended(answer("All of it."))
    assert rest["text"] == "All of it." and rest["index"] == 0


def test_a_newer_attempt_starts_its_text_over():
    turn = TurnText(T, lambda turn_id: None)
    turn.live(delta(0, "first try"))
    assert texts(turn.live(delta(0, "second", attempt=2))) == ["second"]
    assert turn.live(delta(1, " late", attempt=1)) == []
    assert texts(turn.ended(answer("second try"))) == [" try"]
