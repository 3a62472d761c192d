"""The runtime on a real store (SQLite and Postgres) with follow-ups run in-process."""
from __future__ import annotations

import pytest
from sqlalchemy import event

from agentq.cli.check import check_conversation
from agentq.errors import Conflict, Stale
from agentq.followups import Advance
from agentq.runtime.lifecycle import Claim
from agentq.runtime.tool_step import ToolStep
from agentq.store.ledger import ALONE_AFTER_DEATHS
from agentq.tools import ToolOutcome
from tests.support.drive import drain
from tests.support.store import claim
from tests.support.turn_fixtures import clock, commands, providers, runtime  # noqa: F401
from tests.support.turns import APPROVAL, SCOPE, WEATHER, start, types


def test_a_turn_with_a_server_tool_completes_with_the_log_in_order(store, runtime, commands):
    cid, _ = start(commands, runtime, WEATHER)
    events = store.log.list_events(cid)
    assert [e.type for e in events] == [
        "user_msg", "assistant_msg", "tool_call", "tool_result", "assistant_msg"
    ]
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    first, second = events[1].round_id, events[4].round_id
    assert first and second and first != second
    assert events[2].round_id == first and events[3].content["status"] == "ok"
    assert events[4].content["text"] == "Cold in Oslo."
    assert store.conversations.load(cid).fsm.state == "idle"
    assert check_conversation(store, cid) == []  # inv. 1: the commit's cached state is the log's


def test_running_every_step_again_changes_nothing_and_calls_the_model_once_per_round(
    store, runtime, commands, providers
):
    cid, _ = start(commands, runtime, WEATHER)
    before = store.log.list_events(cid)
    for _ in range(3):
        drain(runtime, runtime.advance(cid))
        for call in store.calls.list_of(cid):
            drain(runtime, runtime.run_tool(cid, call.id))
    assert store.log.list_events(cid) == before
    assert providers.calls == 2


def test_a_tool_the_model_invents_gets_an_error_result_the_model_can_read(store, runtime, commands):
    script = [{"text": "", "tool_calls": [{"name": "launch_rockets", "args": {}}]}, {"text": "Sorry."}]
    cid, _ = start(commands, runtime, script)
    result = next(e for e in store.log.list_events(cid) if e.type == "tool_result")
    assert result.content["status"] == "error"
    assert "unknown tool" in result.content["output"]
    assert types(store, cid)[-1] == "assistant_msg"


def test_arguments_that_do_not_match_the_schema_get_an_error_result(store, runtime, commands):
    script = [{"tool_calls": [{"name": "get_weather", "args": {"town": "Oslo"}}]}, {"text": "Oops."}]
    cid, _ = start(commands, runtime, script)
    result = next(e for e in store.log.list_events(cid) if e.type == "tool_result")
    assert result.content["status"] == "error"
    assert "city" in result.content["output"]
    assert store.conversations.load(cid).fsm.state == "idle"


def test_a_tool_that_raises_gives_an_error_result_not_a_crash(store, runtime, commands):
    script = [{"tool_calls": [{"name": "explode", "args": {}}]}, {"text": "It failed."}]
    cid, _ = start(commands, runtime, script)
    result = next(e for e in store.log.list_events(cid) if e.type == "tool_result")
    assert result.content["status"] == "error" and "exploded" in result.content["output"]


def test_a_human_call_suspends_the_conversation_until_it_is_resolved(store, runtime, commands):
    cid, later = start(commands, runtime, APPROVAL)
    info = store.conversations.load(cid)
    assert info.fsm.state == "awaiting_input"
    assert types(store, cid) == ["user_msg", "assistant_msg", "tool_call", "suspension"]
    (call_id,) = info.fsm.pending
    assert [e.tool_call_id for e in later] == [call_id]
    _, follow = commands.resolve(cid, call_id, SCOPE, status="resolved", result={"ok": True})
    drain(runtime, follow)
    assert types(store, cid)[4:] == ["resolution", "tool_result", "assistant_msg"]
    assert store.calls.load(cid, call_id).status == "resolved"
    assert check_conversation(store, cid) == []


def test_a_suspension_creates_no_error_entry(store, runtime, commands):
    cid, _ = start(commands, runtime, APPROVAL)
    assert "error" not in types(store, cid)
    assert all(step.last_error is None for step in store.steps.list_of(cid))


def test_an_overdue_call_expires_by_the_system_and_the_turn_goes_on(store, runtime, commands, clock):
    cid, later = start(commands, runtime, APPROVAL)
    (call_id,) = store.conversations.load(cid).fsm.pending
    assert drain(runtime, later) == later  # not due yet: nothing happens
    clock.tick(61)
    drain(runtime, later)
    events = store.log.list_events(cid)
    resolution = next(e for e in events if e.type == "resolution")
    assert resolution.content == {"tool_call_id": call_id, "status": "expired", "by": "system"}
    assert [e.type for e in events][-2:] == ["tool_result", "assistant_msg"]
    with pytest.raises(Conflict):
        commands.resolve(cid, call_id, SCOPE, status="resolved", result={"ok": True})


def test_an_expiry_that_loses_the_race_to_a_resolution_changes_nothing(store, runtime, commands, clock):
    cid, later = start(commands, runtime, APPROVAL)
    (call_id,) = store.conversations.load(cid).fsm.pending
    commands.resolve(cid, call_id, SCOPE, status="resolved", result={"ok": True})
    log = store.log.list_events(cid)
    clock.tick(61)
    assert runtime.expire(cid, call_id) == []
    assert store.log.list_events(cid) == log


def test_every_delta_carries_the_round_id_of_its_own_response_seed_004(store, runtime, commands):
    cid, _ = start(commands, runtime, WEATHER)
    by_round: dict[str, str] = {}
    for kind, data in runtime.pubsub.notices:
        if kind == "delta":
            by_round[data["round_id"]] = by_round.get(data["round_id"], "") + data["text"]
    answers = {e.round_id: e.content["text"] for e in store.log.list_events(cid) if e.type == "assistant_msg"}
    assert by_round == answers


def events_notices(runtime) -> list[dict]:
    return [d for k, d in runtime.pubsub.notices if k == "events"]


def test_held_notices_go_out_when_the_block_ends_the_newest_per_conversation(store, runtime, commands):
    conv = commands.create_conversation(SCOPE, {"script": WEATHER})
    _, follow = commands.post_message(conv.id, "hello", SCOPE)
    with runtime.notices.held():
        (advance,) = follow
        run_tool = runtime.advance(advance.conversation_id)  # the model asks for the tool
        assert events_notices(runtime) == []
        assert [k for k, _ in runtime.pubsub.notices if k == "delta"]  # deltas stream at once
    assert events_notices(runtime) == [{"last_seq": 3}]  # user_msg, assistant_msg, tool_call
    runtime.notices.notify(conv.id, store.log.list_events(conv.id)[-1:])  # not held: at once
    assert len(events_notices(runtime)) == 2
    drain(runtime, run_tool)


def test_a_turns_end_is_told_at_once_and_the_notices_it_makes_stale_are_dropped(
    store, runtime, commands
):
    conv = commands.create_conversation(SCOPE, {"script": WEATHER})
    _, follow = commands.post_message(conv.id, "hello", SCOPE)
    with runtime.notices.held():
        drain(runtime, follow)  # the whole turn: the tool step's notice is held, the end's is not
        last_seq = store.conversations.load(conv.id).next_seq - 1
        assert events_notices(runtime) == [{"last_seq": last_seq}]
    assert events_notices(runtime) == [{"last_seq": last_seq}]  # nothing older after it


def test_a_turns_streams_are_told_of_its_end_before_the_inbox_is_read(store, runtime, commands):
    """On PostgreSQL the read of whether a message waits follows the turn's last commit: its
    streams do not wait for that read. (SQLite reads it in the commit's transaction.)"""
    told_at_read: list[int] = []

    def _sent(_conn, _cursor, statement, *_args) -> None:
        if "FROM inbox" in statement:
            told_at_read.append(len(events_notices(runtime)))

    conv = commands.create_conversation(SCOPE, {"script": WEATHER})
    _, follow = commands.post_message(conv.id, "hello", SCOPE)
    event.listen(store.engine, "before_cursor_execute", _sent)
    try:
        with runtime.notices.held():
            drain(runtime, follow)
    finally:
        event.remove(store.engine, "before_cursor_execute", _sent)
    # one read of the inbox: after the end's notice, or in the commit on SQLite
    assert told_at_read == {"postgresql": [1], "sqlite": [0]}[store.dialect.name]


def test_a_resumed_conversation_runs_its_open_tool_calls_without_calling_the_model_seed_000(
    store, runtime, commands, providers
):
    conv = commands.create_conversation(SCOPE, {"script": [
        {"tool_calls": [{"name": "lookup", "args": {"key": "a"}}, {"name": "lookup", "args": {"key": "b"}}]},
        {"text": "done"},
    ]})
    _, follow = commands.post_message(conv.id, "go", SCOPE)
    runtime.advance(conv.id)  # the model answers; the worker "dies" before sending the tool tasks
    assert providers.calls == 1
    drain(runtime, [follow[0]])  # a fresh advance after restart
    events = store.log.list_events(conv.id)
    assert providers.calls == 2  # one more round only: the one after the results
    results = [e.content["tool_call_id"] for e in events if e.type == "tool_result"]
    calls = [e.content["tool_call_id"] for e in events if e.type == "tool_call"]
    assert sorted(results) == sorted(calls) and len(calls) == 2


def test_transient_failures_are_retried_then_the_round_succeeds(store, runtime, commands):
    script = [{"text": "finally", "fail": {"status": 429, "times": 2}}]
    cid, _ = start(commands, runtime, script)
    assert types(store, cid) == ["user_msg", "assistant_msg"]
    retries = [d for k, d in runtime.pubsub.notices if k == "retry"]
    assert [r["attempt"] for r in retries] == [1, 2] and all(r["transient"] for r in retries)
    (llm,) = [s for s in store.steps.list_of(cid) if s.kind == "llm"]
    assert llm.retries == 2 and llm.status == "succeeded"


def test_a_permanent_failure_fails_the_conversation_with_an_error_event(store, runtime, commands, providers):
    script = [{"text": "never", "fail": {"status": 401, "times": 1}}]
    cid, _ = start(commands, runtime, script)
    events = store.log.list_events(cid)
    assert [e.type for e in events] == ["user_msg", "error"]
    assert events[1].content["status"] == "failed_permanent"
    assert store.conversations.load(cid).fsm.state == "failed"
    assert providers.calls == 1  # a permanent error is not retried


def test_a_turn_stops_with_an_error_after_the_round_limit(store, runtime, commands):
    loop = [{"tool_calls": [{"name": "lookup", "args": {"key": str(i)}}]} for i in range(5)]
    cid, _ = start(commands, runtime, loop, limits={"max_rounds_per_turn": 3})
    events = store.log.list_events(cid)
    assert sum(e.type == "assistant_msg" for e in events) == 3
    assert events[-1].type == "error" and events[-1].content["code"] == "round_limit"


def test_tools_run_with_the_asker_scope_but_with_the_system_scope_after_an_expiry(
    store, runtime, commands, clock
):
    script = [
        {"tool_calls": [{"name": "whoami", "args": {}}]},
        {"tool_calls": [{"name": "approve", "args": {"amount": 1}}]},
        {"tool_calls": [{"name": "whoami", "args": {}}]},
        {"text": "done"},
    ]
    cid, later = start(commands, runtime, script)
    clock.tick(61)
    drain(runtime, later)
    results = [e.content for e in store.log.list_events(cid) if e.type == "tool_result"]
    assert results[0]["status"] == "ok" and results[0]["output"]["user"] == "u1"
    assert results[1]["status"] == "expired"
    assert results[2]["status"] == "error" and "user scope" in results[2]["output"]


def test_a_poison_tool_step_fails_its_call_after_max_attempts_and_the_turn_goes_on(
    store, runtime, commands, clock
):
    script = [{"tool_calls": [{"name": "lookup", "args": {"key": "x"}}]}, {"text": "ok"}]
    conv = commands.create_conversation(SCOPE, {"script": script})
    _, follow = commands.post_message(conv.id, "go", SCOPE)
    (run_tool,) = drain_until_tool(runtime, follow)
    # each claimant dies mid-step: twice among others, then alone until its faults are used up
    for attempt in range(ALONE_AFTER_DEATHS + runtime.config.max_attempts):
        assert claim(store, run_tool.step_key, worker=f"dead{attempt}", lease_s=1, now=clock(),
                     max_attempts=runtime.config.max_attempts, alone=True)
        clock.tick(2)
    drain(runtime, [run_tool])
    events = store.log.list_events(conv.id)
    result = next(e for e in events if e.type == "tool_result")
    assert result.content["status"] == "error" and "giving up" in result.content["output"]
    assert events[-1].type == "assistant_msg" and store.conversations.load(conv.id).fsm.state == "idle"
    assert store.steps.load(run_tool.step_key).status == "failed_permanent"


def test_a_task_that_comes_while_a_step_runs_alone_is_sent_on_then_kept_until_it_ends(
    store, runtime, commands
):
    script = [{"tool_calls": [{"name": "lookup", "args": {"key": "x"}}]}, {"text": "ok"}]
    tool_conv = commands.create_conversation(SCOPE, {"script": script})
    (run_tool,) = drain_until_tool(runtime, commands.post_message(tool_conv.id, "go", SCOPE)[1])
    model_conv = commands.create_conversation(SCOPE, {"script": [{"text": "hi"}]})
    commands.post_message(model_conv.id, "go", SCOPE)
    with runtime._lifecycle.admission.alone():  # a suspect step of this process runs alone
        # each is sent on at once, for another process to take
        assert runtime.run_tool(run_tool.conversation_id, run_tool.tool_call_id) == [run_tool]
        assert runtime.advance(model_conv.id) == [Advance(model_conv.id)]
        # back here while the gate is still closed: kept, and nothing goes out meanwhile
        assert runtime.run_tool(run_tool.conversation_id, run_tool.tool_call_id) == []
        assert runtime.advance(model_conv.id) == []
        assert runtime.wake([]) == []
        assert store.steps.load(run_tool.step_key).status == "scheduled"  # unclaimed
        assert not any(s.kind == "model" for s in store.steps.list_of(model_conv.id))
    redrives = runtime.wake([])
    assert redrives == [run_tool, Advance(model_conv.id)]
    assert runtime.wake([]) == []  # each once
    drain(runtime, redrives)
    for cid in (tool_conv.id, model_conv.id):
        assert store.conversations.load(cid).fsm.state == "idle"
        assert types(store, cid)[-1] == "assistant_msg"


def drain_until_tool(runtime, followups):
    """Run follow-ups until the first RunTool, and return it unrun."""
    from agentq.followups import RunTool

    queue = list(followups)
    while queue:
        item = queue.pop(0)
        if isinstance(item, RunTool):
            return [item]
        queue.extend(runtime.advance(item.conversation_id))
    raise AssertionError("no tool was dispatched")


MIXED = [
    {"text": "Both.", "tool_calls": [{"name": "lookup", "args": {"key": "a"}},
                                     {"name": "approve", "args": {"amount": 2}}]},
    {"text": "All done."},
]


@pytest.mark.parametrize("resolve_first", [True, False])
def test_a_round_mixing_a_server_tool_and_a_person_completes_in_either_order(
    store, runtime, commands, resolve_first
):
    conv = commands.create_conversation(SCOPE, {"script": MIXED})
    _, follow = commands.post_message(conv.id, "go", SCOPE)
    (run_tool,) = drain_until_tool(runtime, follow)
    (call_id,) = store.conversations.load(conv.id).fsm.pending
    if resolve_first:
        _, after = commands.resolve(conv.id, call_id, SCOPE, status="resolved", result="yes")
        assert not [f for f in after if isinstance(f, Advance)]  # the server call is still open
        assert store.conversations.load(conv.id).fsm.state == "running"
        drain(runtime, [run_tool])
    else:
        drain(runtime, [run_tool])
        assert store.conversations.load(conv.id).fsm.state == "awaiting_input"
        _, after = commands.resolve(conv.id, call_id, SCOPE, status="resolved", result="yes")
        drain(runtime, after)
    events = store.log.list_events(conv.id)
    assert [e.type for e in events].count("tool_result") == 2
    assert events[-1].content["text"] == "All done."


def test_a_model_call_past_its_time_limit_is_closed_and_fails_as_a_timeout(store, runtime, commands):
    script = [{"text": "far too slow", "chunks": 5, "delay_s": 30}]
    cid, _ = start(commands, runtime, script, limits={"llm_timeout_s": 0.3})
    events = store.log.list_events(cid)
    assert [e.type for e in events] == ["user_msg", "error"]
    assert events[1].content["status"] == "timeout" and events[1].content["code"] == "step_timeout"
    assert store.conversations.load(cid).fsm.state == "failed"
    (step,) = store.steps.list_of(cid)
    assert step.status == "timeout"


TWO_LOOKUPS = [
    {"tool_calls": [{"name": "lookup", "args": {"key": "a"}}, {"name": "lookup", "args": {"key": "b"}}]},
    {"text": "done"},
]


def _tool_steps_read_now(runtime, cid):
    """A ToolStep per open call, each with the call and conversation as read now."""
    found = [runtime.store.calls.load_with_conversation(cid, c.id) for c in runtime.store.calls.list_of(cid)]
    return [ToolStep(runtime._ctx, runtime.registry, conversation, call) for conversation, call in found]


def test_calls_of_one_round_read_before_either_commits_both_land_gap_free(store, runtime, commands):
    """The second commit finds the log moved past where it read it, and appends under the lock."""
    cid = commands.create_conversation(SCOPE, {"script": TWO_LOOKUPS}).id
    commands.post_message(cid, "go", SCOPE)
    runtime.advance(cid)  # the model asks for both calls
    first, second = _tool_steps_read_now(runtime, cid)
    drain(runtime, runtime._lifecycle.run(first))
    drain(runtime, runtime._lifecycle.run(second))
    events = store.log.list_events(cid)
    assert [e.type for e in events] == [
        "user_msg", "assistant_msg", "tool_call", "tool_call", "tool_result", "tool_result",
        "assistant_msg",
    ]
    assert [e.seq for e in events] == list(range(1, 8))
    assert {c.status for c in store.calls.list_of(cid)} == {"done"}
    assert store.conversations.load(cid).fsm.state == "idle"
    assert check_conversation(store, cid) == []  # inv. 1: both folds agree with the log


def test_a_tool_commit_whose_step_was_taken_over_writes_nothing(store, runtime, commands, clock):
    cid = commands.create_conversation(SCOPE, {"script": TWO_LOOKUPS}).id
    commands.post_message(cid, "go", SCOPE)
    runtime.advance(cid)
    work = _tool_steps_read_now(runtime, cid)[0]
    claim(store, work.step.key, worker="w-new", lease_s=30, now=clock(), max_attempts=5)
    before = store.log.list_events(cid)
    with pytest.raises(Stale):
        work.commit(Claim(cid, work.step, "w-old", attempts=1, retries=0), ToolOutcome("ok", "a"))
    assert store.log.list_events(cid) == before
    assert store.calls.load(cid, work.call.id).status == "scheduled"
    assert store.steps.load(work.step.key).worker == "w-new"
    assert store.conversations.load(cid).next_seq == before[-1].seq + 1


def test_an_async_tool_is_awaited_and_its_value_is_the_tool_result(store, runtime, commands):
    cid, _ = start(commands, runtime, [
        {"tool_calls": [{"name": "async_lookup", "args": {"key": "k9"}}]}, {"text": "found"}])
    [result] = [e for e in store.log.list_events(cid) if e.type == "tool_result"]
    assert result.content["status"] == "ok"
    assert result.content["output"] == "async value of K9"


def test_a_tool_result_over_the_operators_cap_is_stored_cut_saying_its_size(store, runtime, commands):
    cap = runtime.config.tool_result_max_chars
    cid, _ = start(commands, runtime, [
        {"tool_calls": [{"name": "big_result", "args": {"size": cap + 5000}}]}, {"text": "long"}])
    [result] = [e for e in store.log.list_events(cid) if e.type == "tool_result"]
    assert result.content["output"] == "x" * cap + (
        f"\n[result cut: {cap + 5000:,} characters, the first {cap:,} shown]")
