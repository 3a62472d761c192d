"""bench/deploy.py, briefly: every process of a deployment stopped with SIGTERM and started
again under load, and nothing given up, stuck or duplicated; and how it judges a stream."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from agentq.api import EventOut
from bench.deploy import ROOT, StreamWatch, failed


def event(seq: int, turn: str, kind: str = "tool_result", round_id: str | None = None, text: str = ""):
    return EventOut(id=f"e{seq}", seq=seq, type=kind, turn_id=turn, round_id=round_id,
                    created_at="2026-01-01T00:00:00Z", content={"text": text} if text else {})


def watched(seqs: list[int], texts: dict[str, dict[int, str]], connections: int = 1) -> StreamWatch:
    watch = StreamWatch("http://x", "k", "c1", "t1")
    watch.seqs, watch.connections, watch.end = seqs, connections, "idle"
    watch.texts.update(texts)
    return watch


def test_a_stream_that_reconnected_and_saw_every_event_once_with_its_deltas_whole_is_clean():
    log = [event(1, "t1", "user_msg"), event(2, "t1", "assistant_msg", "r1", "Hello there."),
           event(3, "t0", "user_msg")]
    seen = watched([1, 2], {"r1": {0: "Hello", 1: "Hello there."}}, connections=2).judged(log, "Hello there.")
    assert seen["reconnected"] == 1 and seen["missed_events"] == 0 and seen["duplicate_events"] == 0
    assert (seen["rounds_whole"], seen["rounds_garbled"], seen["answer_whole"]) == (1, 0, 1)


def test_a_missed_event_a_repeated_one_and_a_delta_twice_are_each_counted():
    log = [event(1, "t1", "user_msg"), event(2, "t1", "assistant_msg", "r1", "Hello there."),
           event(3, "t1", "assistant_msg", "r2", "Bye.")]
    seen = watched([1, 1, 2], {"r1": {0: "HelloHello there."}, "r2": {0: "By"}}).judged(log, "Bye.")
    assert seen["missed_events"] == 1 and seen["duplicate_events"] == 1
    assert (seen["rounds_garbled"], seen["rounds_beginning"], seen["answer_whole"]) == (1, 1, 0)


CLEAN = {"given_up": 0, "stuck": 0, "duplicated": 0, "violations": [], "pids_changed": True,
         "streams": {"missed_events": 0, "duplicate_events": 0, "rounds_garbled": 0}}


def test_a_deploy_fails_on_a_stuck_turn_a_garbled_stream_or_no_restart():
    assert not failed(CLEAN)
    assert failed({**CLEAN, "stuck": 1})
    assert failed({**CLEAN, "streams": {**CLEAN["streams"], "rounds_garbled": 1}})
    assert failed({**CLEAN, "pids_changed": False})


@pytest.mark.slow
@pytest.mark.worker
@pytest.mark.postgres
@pytest.mark.redis
def test_a_short_rolling_deploy_loses_nothing_and_restarts_every_process(tmp_path):
    done = subprocess.run(
        [sys.executable, "bench/deploy.py", "--minutes", "0.3", "--restart-every-s", "4",
         "--quiet-s", "4", "--clients", "2", "--settle-s", "120", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert verdict["conversations"] >= 2 and verdict["finished"] == verdict["conversations"]
    assert (verdict["given_up"], verdict["stuck"], verdict["duplicated"]) == (0, 0, 0)
    assert verdict["violations"] == [] and verdict["over_grace"] == 0
    assert set(verdict["restarted"]) == {"worker0", "worker1", "api0", "api1"}
    assert all(r["old_pid"] != r["new_pid"] for r in verdict["restart_log"])
    assert verdict["streams"]["turns"] >= 2 and verdict["streams"].get("rounds_garbled", 0) == 0
