"""`once` tools with real worker processes on Redis and Postgres: a worker SIGKILLed while
a `once` tool runs (its side effect written at its start), with and without the broker
losing its tasks. The effect happened once, the call waits as outcome_unknown, and each
answer leads where it says; an idempotent call of the same round runs again as always."""
from __future__ import annotations

import json

import pytest

from agentq.core import once
from agentq.core.scope import Scope
from agentq.worker.tasks import enqueue
from tests.support.brokers import flush_broker
from tests.support.processes import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

ALICE = Scope(tenant="t1", user="alice")
PERSON = Scope(tenant="t1", user="bob")


def paying(tool: str = "pay", order: str = "A-17", seconds: float = 4) -> list[dict]:
    """A round that pays (once) and looks something up (idempotent), both slow."""
    return [{"text": "Paying.", "tool_calls": [
        {"name": tool, "args": {"order": order, "amount": 12.5, "seconds": seconds}},
        {"name": "slow_lookup", "args": {"key": "k", "seconds": seconds}}]},
        {"text": "Done."}]


def begin(commands, broker, script):
    conv = commands.create_conversation(ALICE, {"script": script})
    _, follow = commands.post_message(conv.id, "pay order A-17", ALICE)
    enqueue(broker, follow)
    return conv.id


def payments(effects) -> list[str]:
    """The call ids of the payments made, one per run of the tool's body."""
    return [json.loads(line)["call"] for line in effects.read_text().splitlines()]


def pay_call(store, cid):
    return next(c for c in store.calls.list_of(cid) if c.name.startswith("pay"))


def unknown(store, cid, run: int = 0):
    call = pay_call(store, cid)
    return call if once.waits(call) and once.run_of(call.started) == run else None


def finished(store, cid):
    info = store.conversations.load(cid)
    return info.fsm.state == "idle" and info.fsm.rounds >= 2


@pytest.fixture
def files(tmp_path):
    effects, tool_log = tmp_path / "effects.jsonl", tmp_path / "tool.log"
    effects.touch()
    tool_log.touch()
    return effects, tool_log


def killed_mid_call(store, commands, broker, workers, beat, broker_url, files, *, flush: bool,
                    script=None):
    """A conversation whose worker was SIGKILLed while its tools ran, then taken over."""
    effects, tool_log = files
    env = {"AGENTQ_TEST_EFFECTS": str(effects), "AGENTQ_TEST_TOOL_LOG": str(tool_log)}
    cid = begin(commands, broker, script or paying())
    first = workers("w1", **env)
    wait_for(lambda: payments(effects) and tool_log.read_text(), what="both tools to start")
    first.kill()
    if flush:
        flush_broker(broker_url)
    second = workers("w2", **env)
    beat()
    return cid, first, second, env


@pytest.mark.parametrize("flush", [False, True], ids=["broker-kept", "broker-flushed"])
def test_a_once_call_whose_worker_is_killed_mid_call_took_effect_once_and_is_outcome_unknown(
    pg_store_clean, commands, broker, workers, beat, broker_url, files, flush
):
    store, (effects, tool_log) = pg_store_clean, files
    cid, first, _, _ = killed_mid_call(store, commands, broker, workers, beat, broker_url, files,
                                    flush=flush)
    call = wait_for(lambda: unknown(store, cid), what="the call to wait as outcome_unknown")
    lookups = wait_for(lambda: len(tool_log.read_text().split()) == 2 and tool_log.read_text(),
                       what="the idempotent lookup to run again")
    assert len(set(lookups.split())) == 1  # the same lookup call, run again as always
    assert payments(effects) == [call.id]
    assert call.started["worker"].split(":")[1] == str(first.pid)
    wait_for(lambda: store.conversations.load(cid).fsm.state == "awaiting_input",
             what="the conversation to await the person")
    assert store.conversations.load(cid).fsm.rounds == 1
    closed, follow = commands.resolve(cid, call.id, PERSON, status="ran",
                                      result="paid 12.50, receipt R-9")
    enqueue(broker, follow)
    wait_for(lambda: finished(store, cid), what="the turn to finish")
    assert payments(effects) == [call.id]
    result = next(e for e in store.log.list_events(cid)
                  if e.type == "tool_result" and e.content["tool_call_id"] == call.id)
    assert result.content == {"tool_call_id": call.id, "status": "ok",
                              "output": "paid 12.50, receipt R-9"}


def test_did_not_run_runs_the_call_once_and_a_second_death_makes_it_outcome_unknown_again(
    pg_store_clean, commands, broker, workers, beat, broker_url, files
):
    store, (effects, _) = pg_store_clean, files
    cid, _, second, env = killed_mid_call(store, commands, broker, workers, beat, broker_url, files,
                                  flush=False)
    call = wait_for(lambda: unknown(store, cid), what="the call to wait as outcome_unknown")
    _, follow = commands.resolve(cid, call.id, PERSON, status="did_not_run", result=None)
    enqueue(broker, follow + follow)  # delivered twice: still one run
    wait_for(lambda: len(payments(effects)) == 2, what="the call to run once more")
    running = store.calls.load(cid, call.id).started
    assert running["run"] == 1 and running["worker"].split(":")[1] == str(second.pid)
    second.kill()  # the worker running it dies too, mid-call
    workers("w3", **env)
    again = wait_for(lambda: unknown(store, cid, run=1), what="the second run to be unknown")
    assert payments(effects) == [call.id, call.id]
    _, follow = commands.resolve(cid, again.id, PERSON, status="abandoned", result=None,
                                 reason="the bank will call back")
    enqueue(broker, follow)
    wait_for(lambda: finished(store, cid), what="the turn to finish")
    assert payments(effects) == [call.id, call.id]
    result = next(e for e in store.log.list_events(cid)
                  if e.type == "tool_result" and e.content["tool_call_id"] == call.id)
    assert result.content["status"] == "error"
    assert "outcome of this call is unknown" in result.content["output"]


def test_a_reconcile_that_finds_the_payment_closes_the_call_without_a_person(
    pg_store_clean, commands, broker, workers, beat, broker_url, files
):
    store, (effects, _) = pg_store_clean, files
    cid, _, _, _ = killed_mid_call(store, commands, broker, workers, beat, broker_url, files,
                                flush=True, script=paying("pay_reconciled"))
    wait_for(lambda: finished(store, cid), what="the turn to finish without a person")
    call = pay_call(store, cid)
    assert payments(effects) == [call.id] and call.status == "done"
    assert not any(e.type == "suspension" for e in store.log.list_events(cid))
    result = next(e for e in store.log.list_events(cid)
                  if e.type == "tool_result" and e.content["tool_call_id"] == call.id)
    assert result.content["output"] == "paid 12.50 for order A-17 (found)"
