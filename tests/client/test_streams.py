"""TurnCursor: across reconnections, each event once and each piece of text once."""
from __future__ import annotations

import json

from agentq.client.streams import TurnCursor

T = "turn-1"


def delta(index: int, text: str, attempt: int = 1) -> tuple[str, str]:
    return "delta", json.dumps({"round_id": "r1", "turn_id": T, "index": index,
                                "attempt": attempt, "text": text})


def event(seq: int) -> tuple[str, str]:
    return "event", json.dumps({"id": f"e{seq}", "seq": seq, "type": "user_msg", "turn_id": T,
                                "round_id": None, "created_at": "2026-01-01T00:00:00Z",
                                "content": {"text": "hi"}})


def accepted(cursor: TurnCursor, *frames) -> list:
    return [item for kind, data in frames if (item := cursor.accept(kind, data)) is not None]


def test_after_a_reconnection_the_text_sent_again_from_its_start_yields_only_the_rest():
    cursor = TurnCursor(T)
    cursor.connected()
    first = accepted(cursor, event(1), delta(0, "Hel"), delta(1, "lo"))
    cursor.connected()
    again = accepted(cursor, event(1), delta(3, "Hello, wor"), delta(4, "ld"))
    assert [i.text for i in first[1:]] + [i.text for i in again] == ["Hel", "lo", ", wor", "ld"]
    assert cursor.last_seq == 1


def test_an_event_already_handed_out_is_not_handed_out_again():
    cursor = TurnCursor(T)
    cursor.connected()
    assert len(accepted(cursor, event(1), event(2))) == 2
    cursor.connected()
    assert [i.seq for i in accepted(cursor, event(2), event(3))] == [3]


def test_an_unknown_frame_kind_is_skipped():
    cursor = TurnCursor(T)
    cursor.connected()
    assert cursor.accept("something-new", "{}") is None
