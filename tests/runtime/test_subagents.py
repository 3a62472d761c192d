"""Sub-agents on a real store (SQLite and Postgres), follow-ups run in-process: a parent's
call starts one child conversation, waits for it, and reads its answer."""
from __future__ import annotations

from datetime import timedelta

import pytest

from agentq.cli.check import check_conversation
from agentq.commands import Commands
from agentq.config import Config
from agentq.core.agents import AgentDefinition
from agentq.core.ceilings import Ceilings
from agentq.core.scope import Scope
from agentq.core.settings import Settings
from agentq.core.subagents import child_conversation_id
from agentq.errors import Conflict
from agentq.followups import Advance, RunTool
from agentq.runtime import Runtime
from agentq.tools import Registry
from tests.support.clock import Clock
from tests.support.drive import Recorder, drain
from tests.support.rules import Rules

ALICE = Scope(tenant="t1", user="alice")


def ask(name: str, text: str) -> dict:
    return {"name": name, "args": {"input": text}}


@pytest.fixture
def clock():
    return Clock()


def make_runtime(store, clock, **kwargs):
    registry = Registry.from_modules(["agentq.tools.demo", "tests.support.tools_for_tests"])
    return Runtime(store=store, registry=registry, pubsub=Recorder(), config=Config(lease_s=30.0),
                   clock=clock, sleep=lambda s: None, **kwargs)


@pytest.fixture
def runtime(store, clock):
    return make_runtime(store, clock)


@pytest.fixture
def commands(runtime, clock):
    return Commands(runtime.store, runtime.registry, clock=clock,
                    close_round=runtime.pubsub.close_round)


def run_one(runtime, task) -> list:
    """Run one task as a worker would; the follow-ups it asks for."""
    match task:
        case RunTool(conversation_id=cid, tool_call_id=call_id):
            return runtime.run_tool(cid, call_id)
        case Advance(conversation_id=cid):
            return runtime.advance(cid)
    raise AssertionError(f"unexpected task {task!r}")


def run_some(runtime, tasks, count: int) -> list:
    """Run the first `count` tasks, breadth first; those left."""
    queue = list(tasks)
    for _ in range(count):
        queue.extend(run_one(runtime, queue.pop(0)))
    return queue


def define(store, clock, name: str, **settings) -> None:
    store.agents.create("t1", AgentDefinition(name=name, settings=Settings(**settings)), now=clock())


def parent(commands, script, agents=("researcher",)):
    return commands.create_conversation(
        ALICE, {"script": script, "agents": [{"name": a} for a in agents]})


def texts(store, cid):
    return [(e.type, e.content.get("text") or e.content.get("output"))
            for e in store.log.list_events(cid) if e.type in ("user_msg", "assistant_msg", "tool_result")]


def test_a_parent_reads_its_childs_answer_as_the_calls_result(store, runtime, commands, clock):
    define(store, clock, "researcher", script=[{"text": "Oslo is rainy."}])
    conv = parent(commands, [{"tool_calls": [ask("researcher", "weather in Oslo?")]},
                             {"text": "It rains."}])
    _, follow = commands.post_message(conv.id, "what is it like?", ALICE)
    drain(runtime, follow)
    (call,) = store.calls.list_of(conv.id)
    child_id = child_conversation_id(conv.id, call.id)
    assert call.executor == "agent" and call.status == "done"
    assert call.result == {"status": "ok", "output": "Oslo is rainy."}
    assert call.to_json()["child_conversation_id"] == child_id
    child = store.conversations.load(child_id)
    assert child.parent.conversation_id == conv.id and child.parent.depth == 1
    assert child.agent.name == "researcher"
    assert texts(store, child_id) == [("user_msg", "weather in Oslo?"),
                                      ("assistant_msg", "Oslo is rainy.")]
    assert texts(store, conv.id)[-1] == ("assistant_msg", "It rains.")
    assert check_conversation(store, conv.id) == [] and check_conversation(store, child_id) == []


def test_running_the_start_and_the_handover_twice_makes_one_child_and_one_result(
        store, runtime, commands, clock):
    define(store, clock, "researcher", script=[{"text": "found it"}])
    conv = parent(commands, [{"tool_calls": [ask("researcher", "look")]}, {"text": "ok"}])
    _, follow = commands.post_message(conv.id, "go", ALICE)
    sent = []
    pending = list(follow)
    while pending:  # every task delivered twice
        task = pending.pop(0)
        sent.append(task)
        pending.extend(run_one(runtime, task))
        pending.extend(run_one(runtime, task))
    (call,) = store.calls.list_of(conv.id)
    child_id = child_conversation_id(conv.id, call.id)
    assert [e.type for e in store.log.list_events(child_id)].count("user_msg") == 1
    results = [e for e in store.log.list_events(conv.id) if e.type == "tool_result"]
    assert len(results) == 1 and results[0].content["output"] == "found it"
    assert any(isinstance(t, RunTool) for t in sent)
    assert check_conversation(store, conv.id) == []


def test_a_failed_child_gives_its_parent_an_error_result(store, runtime, commands, clock):
    define(store, clock, "researcher", script=[{"fail": {"status": 400}}])
    conv = parent(commands, [{"tool_calls": [ask("researcher", "x")]}, {"text": "sorry"}])
    _, follow = commands.post_message(conv.id, "go", ALICE)
    drain(runtime, follow)
    (call,) = store.calls.list_of(conv.id)
    assert call.result["status"] == "error" and "the agent failed" in call.result["output"]
    assert texts(store, conv.id)[-1] == ("assistant_msg", "sorry")
    assert check_conversation(store, conv.id) == []


def test_a_call_past_the_depth_ceiling_is_an_error_result_and_starts_no_child(store, clock):
    runtime = make_runtime(store, clock, rules=Rules(ceilings=lambda tenant: Ceilings(max_agent_depth=0)))
    commands = Commands(store, runtime.registry, clock=clock, close_round=runtime.pubsub.close_round)
    define(store, clock, "researcher", script=[{"text": "never"}])
    conv = parent(commands, [{"tool_calls": [ask("researcher", "x")]}, {"text": "alone"}])
    drain(runtime, commands.post_message(conv.id, "go", ALICE)[1])
    (call,) = store.calls.list_of(conv.id)
    assert call.result["status"] == "error" and "max_agent_depth" in call.result["output"]
    assert store.conversations.load(child_conversation_id(conv.id, call.id)) is None


def test_children_past_the_per_turn_ceiling_get_error_results(store, clock):
    runtime = make_runtime(store, clock, rules=Rules(ceilings=lambda t: Ceilings(max_children_per_turn=1)))
    commands = Commands(store, runtime.registry, clock=clock, close_round=runtime.pubsub.close_round)
    define(store, clock, "researcher", script=[{"text": "one"}], script_repeat=True)
    conv = parent(commands, [{"tool_calls": [ask("researcher", "a"), ask("researcher", "b")]},
                             {"text": "done"}])
    drain(runtime, commands.post_message(conv.id, "go", ALICE)[1])
    first, second = sorted(store.calls.list_of(conv.id), key=lambda c: c.args["input"])
    assert first.result == {"status": "ok", "output": "one"}
    assert second.result["status"] == "error" and "max_children_per_turn" in second.result["output"]


def test_an_agent_gone_since_the_settings_were_admitted_is_an_error_result(
        store, runtime, commands, clock):
    # admitted settings name only agents the tenant has; a store written some other way may not
    conv = store.conversations.create(tenant="t1", now=clock(), settings=Settings(
        agents=["researcher"], script=[{"tool_calls": [ask("researcher", "x")]}, {"text": "hm"}]))
    drain(runtime, commands.post_message(conv.id, "go", ALICE)[1])
    (call,) = store.calls.list_of(conv.id)
    assert call.result == {"status": "error", "output": "no agent named 'researcher'"}


def test_a_person_cannot_resolve_a_sub_agent_call(store, runtime, commands, clock):
    define(store, clock, "researcher", script=[{"text": "slow", "delay_s": 0}])
    conv = parent(commands, [{"tool_calls": [ask("researcher", "x")]}, {"text": "hm"}])
    follow = commands.post_message(conv.id, "go", ALICE)[1]
    run_some(runtime, follow, 2)  # the model's call, the child's start; not the child
    (call,) = store.calls.list_of(conv.id)
    with pytest.raises(Conflict):
        commands.resolve(conv.id, call.id, ALICE, status="resolved", result="mine")


def test_interrupting_the_parent_cancels_the_childs_turn(store, runtime, commands, clock):
    define(store, clock, "researcher", script=[{"text": "late"}])
    conv = parent(commands, [{"tool_calls": [ask("researcher", "x")]}, {"text": "hm"}])
    run_some(runtime, commands.post_message(conv.id, "go", ALICE)[1], 2)
    (call,) = store.calls.list_of(conv.id)
    child_id = child_conversation_id(conv.id, call.id)
    assert store.conversations.load(child_id).fsm.state == "running"
    commands.post_message(conv.id, "stop", ALICE, on_busy="interrupt")
    child = store.log.list_events(child_id)
    assert child[-1].type == "assistant_msg" and child[-1].content["interrupted"]
    assert store.calls.load(conv.id, call.id).status == "cancelled"
    assert check_conversation(store, child_id) == [] and check_conversation(store, conv.id) == []


def test_a_childs_model_calls_count_in_its_roots_usage(store, runtime, commands, clock):
    define(store, clock, "researcher", script=[{"text": "Oslo is rainy."}])
    conv = parent(commands, [{"tool_calls": [ask("researcher", "weather?")]}, {"text": "Rain."}])
    drain(runtime, commands.post_message(conv.id, "go", ALICE)[1])
    start, end = clock() - timedelta(days=1), clock() + timedelta(days=1)
    (tree,) = store.usage.report(tenant="t1", start=start, end=end, group_by="day",
                                 by=["root_conversation"], limit=10)
    assert tree.keys == {"root_conversation": conv.id} and tree.tokens.calls == 3
    own = store.usage.report(tenant="t1", start=start, end=end, group_by="day",
                             by=["conversation"], limit=10)
    assert sorted(row.tokens.calls for row in own) == [1, 2]


def test_agentq_check_flags_a_child_whose_parent_made_no_such_call(store, commands, clock):
    from agentq.core import drafts
    from agentq.core.agents import AgentRef
    from agentq.core.subagents import Parent

    conv = parent(commands, [{"text": "hi"}], agents=())
    stray = child_conversation_id(conv.id, "call_never_made")
    with store.writes.locked(conv.id) as tx:
        tx.start_child(stray, settings=Settings(), agent=AgentRef("researcher", 1),
                       parent=Parent(conv.id, "call_never_made", 1, conv.id),
                       first=drafts.user_msg("x", turn_id="t", message_id="m", scope={},
                                             created_at=clock()), now=clock())
    (found,) = check_conversation(store, stray)
    assert found.invariant == "10 one child per call"


def test_a_handover_whose_task_was_lost_is_re_driven_by_the_sweeper(store, runtime, commands, clock):
    define(store, clock, "researcher", script=[{"text": "found"}])
    conv = parent(commands, [{"tool_calls": [ask("researcher", "x")]}, {"text": "ok"}])
    queue = list(commands.post_message(conv.id, "go", ALICE)[1])
    lost = []
    while queue:  # run everything, but lose the task that hands the child's answer over
        task = queue.pop(0)
        if isinstance(task, RunTool) and store.calls.load(conv.id, task.tool_call_id).status == "pending":
            lost.append(task)
            continue
        queue.extend(run_one(runtime, task))
    assert lost and store.conversations.load(conv.id).fsm.state == "awaiting_input"
    clock.tick(runtime.config.sweep_s + 1)
    drain(runtime, runtime.sweep())
    assert store.calls.list_of(conv.id)[0].result == {"status": "ok", "output": "found"}
    assert texts(store, conv.id)[-1] == ("assistant_msg", "ok")


UNATTENDED = {"expire_after_s": 60, "schedule_id": "s1"}
PAY_BOB = [{"text": "Needs approval.", "tool_calls": [
    {"name": "approve_payment", "args": {"amount": 20, "to": "Bob"}}]}, {"text": "Not paid."}]


def test_a_child_of_a_run_nobody_attends_inherits_its_rule_and_its_approval_expires_by_it(
        store, runtime, commands, clock):
    define(store, clock, "payer", script=PAY_BOB)
    conv = parent(commands, [{"tool_calls": [ask("payer", "pay Bob 20")]}, {"text": "Reported."}],
                  agents=("payer",))
    _, follow = commands.post_message(conv.id, "nightly payments", ALICE, unattended=UNATTENDED)
    later = drain(runtime, follow)
    (call,) = store.calls.list_of(conv.id)
    child_id = child_conversation_id(conv.id, call.id)
    (waiting,) = store.calls.list_of(child_id)
    assert waiting.status == "pending"
    assert waiting.expires_at == waiting.created_at + timedelta(seconds=60)  # not its hour
    assert store.conversations.load(child_id).fsm.unattended == UNATTENDED
    clock.tick(61)
    drain(runtime, later)
    assert store.calls.load(child_id, waiting.id).status == "expired"
    expired = [e for e in store.log.list_events(child_id) if e.type == "tool_result"][-1]
    assert "Nobody attends this run" in expired.content["output"]
    assert store.calls.load(conv.id, call.id).result == {"status": "ok", "output": "Not paid."}
    assert texts(store, conv.id)[-1] == ("assistant_msg", "Reported.")
    assert check_conversation(store, conv.id) == [] and check_conversation(store, child_id) == []


def test_a_child_of_a_persons_turn_waits_as_its_tool_says(store, runtime, commands, clock):
    define(store, clock, "payer", script=PAY_BOB)
    conv = parent(commands, [{"tool_calls": [ask("payer", "pay Bob 20")]}, {"text": "Reported."}],
                  agents=("payer",))
    drain(runtime, commands.post_message(conv.id, "pay Bob", ALICE)[1])
    (call,) = store.calls.list_of(conv.id)
    (waiting,) = store.calls.list_of(child_conversation_id(conv.id, call.id))
    assert waiting.expires_at == waiting.created_at + timedelta(seconds=3600)
