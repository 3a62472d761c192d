"""bench/chaos.py's verdict: what counts as a tool call run twice, and what fails a run."""
from __future__ import annotations

from agentq.core.scope import Scope
from agentq.tools import ToolContext
from bench.chaos import executions, failed
from bench.chaos_tools import chaos_lookup

CLEAN = {"conversations": 200, "finished": 200, "given_up": 0, "failed": 0, "duplicate_results": 0,
         "duplicate_executions": 0, "violations": [], "once_duplicate_effects": 0}


def ledger(tmp_path, *lines: str):
    path = tmp_path / "executions.txt"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_a_call_started_again_after_its_process_was_killed_is_a_rerun_not_a_duplicate(tmp_path):
    path = ledger(tmp_path, "c1 chaos_slow 100 10.0 start", "c1 chaos_slow 200 15.0 start",
                  "c1 chaos_slow 200 18.0 done", "c2 chaos_lookup 200 16.0 start")
    assert executions(path, {100: 12.0}) == {
        "tool_calls_run": 2, "reruns_after_kill": 1, "duplicate_executions": 0,
        "once_calls_run": 0, "once_duplicate_effects": 0}


def test_a_call_started_again_while_its_first_process_lived_is_a_duplicate(tmp_path):
    path = ledger(tmp_path, "c1 chaos_slow 100 10.0 start", "c1 chaos_slow 200 11.0 start")
    assert executions(path, {100: 12.0})["duplicate_executions"] == 1  # killed after the re-run
    assert executions(path, {})["duplicate_executions"] == 1  # never killed


def test_the_chaos_tools_write_down_each_execution_by_call_id(tmp_path, monkeypatch):
    path = tmp_path / "executions.txt"
    monkeypatch.setenv("AGENTQ_CHAOS_LEDGER", str(path))
    ctx = ToolContext(tool_call_id="call-1", conversation_id="c", scope=Scope(tenant="t", user="u"))
    assert chaos_lookup(ctx, "k") == "value of k"
    chaos_lookup(ctx, "k")
    assert executions(path, {})["duplicate_executions"] == 1
    assert [line.split()[-1] for line in path.read_text().splitlines()] == ["start", "done"] * 2


def test_a_run_fails_on_one_lost_conversation_or_one_violation_and_passes_clean():
    assert not failed(CLEAN)
    assert failed({**CLEAN, "finished": 199})
    assert failed({**CLEAN, "violations": ["c1: 8 gap-free seq: expected seq 3, found 4"]})
    assert failed({**CLEAN, "given_up": 1, "finished": 199})


def test_a_once_call_started_twice_is_a_duplicated_effect_even_after_a_kill(tmp_path):
    path = ledger(tmp_path, "c1 chaos_once 100 10.0 start", "c1 chaos_once 200 15.0 start",
                  "c2 chaos_once 200 16.0 start", "c2 chaos_once 200 17.0 done")
    found = executions(path, {100: 12.0})
    assert (found["once_calls_run"], found["once_duplicate_effects"]) == (2, 1)
    assert found["reruns_after_kill"] == 0 and found["duplicate_executions"] == 0
    assert failed({**CLEAN, "once_duplicate_effects": 1})
