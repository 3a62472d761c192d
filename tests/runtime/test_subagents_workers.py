"""Sub-agents with real worker processes on Redis and Postgres: two children in one round,
a child's approval answered from its parent's pending list, a worker killed while a child
runs, and a parent interrupted mid-child; every log passes `agentq check`."""
from __future__ import annotations

import time

import pytest

from agentq.cli.check import check_conversation
from agentq.core.agents import AgentDefinition
from agentq.core.scope import Scope
from agentq.core.settings import Settings
from agentq.core.subagents import child_conversation_id
from agentq.worker.tasks import enqueue
from tests.support.api import Api
from tests.support.processes import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

ALICE = Scope(tenant="t1", user="alice")


def ask(text: str, name: str = "researcher") -> dict:
    return {"name": name, "args": {"input": text}}


def define(store, name: str, **settings) -> None:
    from agentq.process.clock import utcnow

    store.agents.create("t1", AgentDefinition(name=name, settings=Settings(**settings)), now=utcnow())


def begin(commands, broker, script, agents=("researcher",)) -> str:
    conv = commands.create_conversation(ALICE, {"script": script, "agents": list(agents)})
    _, follow = commands.post_message(conv.id, "go", ALICE)
    enqueue(broker, follow)
    return conv.id


def idle_after(store, cid, rounds: int) -> bool:
    info = store.conversations.load(cid)
    return info.fsm.state == "idle" and info.fsm.rounds >= rounds


def all_checked(store, cid) -> None:
    for conversation in [cid, *(c.id for c in store.conversations.list_descendants(cid))]:
        assert check_conversation(store, conversation) == [], conversation


def test_a_parent_delegates_to_two_children_in_one_round_and_reads_both_answers(
    pg_store_clean, commands, broker, workers
):
    store = pg_store_clean
    define(store, "researcher", script=[{"text": "found it", "chunks": 3, "delay_s": 0.3}])
    cid = begin(commands, broker, [{"tool_calls": [ask("Oslo?"), ask("Bergen?")]},
                                   {"text": "Both answered."}])
    workers("w1")
    wait_for(lambda: idle_after(store, cid, 2), what="the parent to answer")
    calls = store.calls.list_of(cid)
    assert [c.result for c in calls] == [{"status": "ok", "output": "found it"}] * 2
    children = store.conversations.list_descendants(cid)
    assert sorted(c.id for c in children) == sorted(child_conversation_id(cid, c.id) for c in calls)
    assert sorted(store.log.list_events(c.id)[0].content["text"] for c in children) == ["Bergen?", "Oslo?"]
    assert store.log.list_events(cid)[-1].content["text"] == "Both answered."
    all_checked(store, cid)


def test_a_childs_approval_is_answered_from_the_parents_pending_list(
    pg_store_clean, commands, broker, workers
):
    store = pg_store_clean
    define(store, "refunder", tools=["issue_refund"], script=[
        {"tool_calls": [{"name": "issue_refund", "args": {"order": "A-17", "amount": 1299.0}}]},
        {"text": "Refunded."}])
    cid = begin(commands, broker, [{"tool_calls": [ask("refund A-17", "refunder")]},
                                   {"text": "The refund is done."}], agents=["refunder"])
    workers("w1")
    api = Api(store)
    alice = api.key("t1", "alice")

    def pending():
        listed = api.get(f"/v1/conversations/{cid}/tool-calls?status=pending", alice).json
        return listed["tool_calls"] if len(listed["tool_calls"]) == 2 else None

    own, waiting = wait_for(pending, what="the child's call to wait for approval")
    (parent_call,) = store.calls.list_of(cid)
    child_id = child_conversation_id(cid, parent_call.id)
    assert (own["executor"], own["child_conversation_id"]) == ("agent", child_id)
    assert (waiting["name"], waiting["conversation_id"], waiting["agent"]) == (
        "issue_refund", child_id, "refunder")
    approved = api.client.post(
        f"/v1/conversations/{waiting['conversation_id']}/tool-calls/{waiting['tool_call_id']}"
        "/resolution", json={"status": "approved"}, headers=alice)
    assert approved.status_code == 200, approved.json
    enqueue(broker, api.sent)
    wait_for(lambda: idle_after(store, cid, 2), what="the parent to answer")
    assert store.calls.load(cid, parent_call.id).result == {"status": "ok", "output": "Refunded."}
    assert store.log.list_events(cid)[-1].content["text"] == "The refund is done."
    all_checked(store, cid)


def test_a_worker_killed_while_a_child_runs_leaves_one_child_and_one_result(
    pg_store_clean, commands, broker, workers, beat
):
    store = pg_store_clean
    define(store, "researcher", script=[{"text": "slow answer", "chunks": 10, "delay_s": 3.0}])
    cid = begin(commands, broker, [{"tool_calls": [ask("dig")]}, {"text": "Dug."}])
    first = workers("w1")
    (call_id,) = wait_for(lambda: store.conversations.load(cid).fsm.pending, what="the agent call")
    child_id = child_conversation_id(cid, call_id)
    wait_for(lambda: any(s.kind == "llm" and s.status == "running"
                         for s in store.steps.list_of(child_id)), what="the child's model step")
    first.kill()
    time.sleep(2.5)  # past the lease
    workers("w2")
    beat()
    wait_for(lambda: idle_after(store, cid, 2), what="the parent to answer after the kill")
    assert [c.id for c in store.conversations.list_descendants(cid)] == [child_id]
    results = [e for e in store.log.list_events(cid) if e.type == "tool_result"]
    assert [(e.content["tool_call_id"], e.content["output"]) for e in results] == [
        (call_id, "slow answer")]
    assert [e.type for e in store.log.list_events(child_id)].count("user_msg") == 1
    all_checked(store, cid)


def test_interrupting_the_parent_mid_child_cancels_the_childs_turn(
    pg_store_clean, commands, broker, workers
):
    store = pg_store_clean
    define(store, "researcher", script=[{"text": "never finished", "chunks": 20, "delay_s": 20.0}])
    cid = begin(commands, broker, [{"tool_calls": [ask("dig")]}, {"text": "unused"}])
    workers("w1")
    (call_id,) = wait_for(lambda: store.conversations.load(cid).fsm.pending, what="the agent call")
    child_id = child_conversation_id(cid, call_id)
    wait_for(lambda: any(s.kind == "llm" and s.status == "running"
                         for s in store.steps.list_of(child_id)), what="the child's model step")
    _, follow = commands.post_message(cid, "stop that", ALICE, on_busy="interrupt")
    enqueue(broker, follow)
    wait_for(lambda: idle_after(store, cid, 2), what="the parent's next turn")
    child = store.log.list_events(child_id)
    assert child[-1].type == "assistant_msg" and child[-1].content["interrupted"]
    assert store.calls.load(cid, call_id).status == "cancelled"
    assert store.conversations.load(child_id).fsm.state == "idle"
    last = store.log.list_events(cid)[-1]  # the next turn went on (the script's past its end)
    assert last.type == "assistant_msg" and last.content["text"] == "echo: stop that"
    all_checked(store, cid)
