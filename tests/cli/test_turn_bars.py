"""`agentq inspect --turn` and `--tree` as text, from the API's JSON, no server."""
from __future__ import annotations

from datetime import UTC, datetime

from agentq.cli.turn_bars import WIDTH, tree_lines, turn_lines

NOW = datetime(2026, 11, 29, 9, 0, 10, tzinfo=UTC)
TURN = {
    "conversation_id": "c1", "turn_id": "t1", "started_at": "2026-11-29T09:00:00.000000Z",
    "ended_at": "2026-11-29T09:00:04.000000Z",
    "steps": [{
        "step_key": "k1", "kind": "tool", "label": "tool get_weather", "status": "succeeded",
        "scheduled_at": "2026-11-29T09:00:00.000000Z", "started_at": "2026-11-29T09:00:01.000000Z",
        "finished_at": "2026-11-29T09:00:04.000000Z", "retries": 1,
        "waits": [{"kind": "slot", "start": "2026-11-29T09:00:00.000000Z",
                   "end": "2026-11-29T09:00:01.000000Z"}],
        "attempts": [
            {"number": 1, "worker": "w1", "claimed_at": "2026-11-29T09:00:01.000000Z",
             "ended_at": None, "outcome": "died", "error": None},
            {"number": 2, "worker": "w2", "claimed_at": "2026-11-29T09:00:03.000000Z",
             "ended_at": "2026-11-29T09:00:04.000000Z", "outcome": "done", "error": None}],
    }],
    "calls": [], "marks": [],
    "model_calls": [{"step_key": "k0", "round_id": "r1", "at": "2026-11-29T09:00:02.000000Z",
                     "usage": {"input_tokens": 12, "output_tokens": 3}, "interrupted": False,
                     "time_to_first_token_ms": None, "cost": None}],
}


def test_a_step_shows_its_wait_its_attempts_with_their_workers_and_its_retries():
    lines = list(turn_lines(TURN, now=NOW))
    assert lines[0] == "turn t1 · 2026-11-29T09:00:00.000000Z · took 4000ms"
    assert "tool get_weather · succeeded · 4000ms · 1 provider retry" in lines[1]
    assert "for a slot · 1000ms" in lines[2]
    assert lines[3].startswith("    #1") and lines[3].endswith("died on w1")
    assert lines[4].startswith("    #2") and lines[4].endswith("done on w2")
    assert "12 in / 3 out" in lines[5]


def test_bars_are_placed_on_one_axis_the_width_of_the_whole_turn():
    lines = list(turn_lines(TURN, now=NOW))
    whole = lines[1].split("  ")[-2]
    second = lines[4][lines[4].index("+3000ms") + len("+3000ms") + 2:][:WIDTH]
    assert whole == "█" * WIDTH
    assert second.index("▒") == 30 and second.count("▒") == 10


def test_the_tree_indents_each_child_under_its_parent():
    tree = {"conversation_id": "c1", "nodes": [
        {"id": "c1", "depth": 0, "state": "idle", "agent": None, "input_tokens": 5,
         "output_tokens": 2, "model_calls": 1, "cost": None},
        {"id": "c2", "depth": 1, "state": "running", "agent": "researcher", "input_tokens": 3,
         "output_tokens": 1, "model_calls": 1, "cost": 0.25}]}
    assert list(tree_lines(tree)) == [
        "c1 · idle · 5 in / 2 out tokens · 1 model call(s)",
        "  c2 · running · agent researcher · 3 in / 1 out tokens · 1 model call(s) · cost 0.25"]
