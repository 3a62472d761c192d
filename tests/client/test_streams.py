"""TurnCursor: across reconnections, each event once and each piece of text once."""
from __future__ import annotations

import json

from agentq.client import StreamRetry
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


def test_a_held_steps_retry_notice_with_its_spent_budget_is_read():
    budget = {"tenant": "acme", "scope": "agent", "period": "day", "limit": 100, "spent": 130,
              "resets_at": "2026-11-22T00:00:00.000000Z", "agent": "support",
              "conversation_id": "c1", "on_exceeded": "wait"}
    notice = {"round_id": "r1", "turn_id": "t1", "attempt": None, "error": "spent",
              "next_delay_s": 3600.0, "until": "2026-11-22T00:00:03.000000Z", "transient": True,
              "budget": budget}
    retry = TurnCursor("t1").accept("retry", json.dumps(notice))
    assert isinstance(retry, StreamRetry) and retry.attempt is None
    assert retry.budget is not None and retry.budget.resets_at == budget["resets_at"]
    breaker = {**notice, "round_id": None, "budget": None, "circuit": "open"}
    assert TurnCursor("t1").accept("retry", json.dumps(breaker)).circuit == "open"
