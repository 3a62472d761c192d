"""Handoffs on a real store (SQLite and Postgres), follow-ups run in-process: a model's
transfer call passes the conversation to another agent in the same turn, later turns go to
the agent that holds it, and a person hands it back through the commands."""
from __future__ import annotations

import pytest

from agentq.cli.check import check_conversation
from agentq.commands import Commands
from agentq.config import Config
from agentq.core.agents import AgentDefinition
from agentq.core.scope import Scope
from agentq.core.settings import Settings
from agentq.errors import Conflict, InvalidInput
from agentq.followups import Advance, RunTool
from agentq.runtime import Runtime
from agentq.tools import Registry
from tests.support.clock import Clock
from tests.support.drive import Recorder, drain

ALICE = Scope(tenant="t1", user="alice")


def transfer(to: str, reason: str = "theirs to answer") -> dict:
    return {"tool_calls": [{"name": f"transfer_to_{to}", "args": {"reason": reason}}]}


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def runtime(store, clock):
    registry = Registry.from_modules(["agentq.tools.demo", "tests.support.tools_for_tests"])
    return Runtime(store=store, registry=registry, pubsub=Recorder(), config=Config(lease_s=30.0),
                   clock=clock, sleep=lambda s: None)


@pytest.fixture
def commands(runtime, clock):
    return Commands(runtime.store, runtime.registry, clock=clock,
                    close_round=runtime.pubsub.close_round)


def define(store, clock, name: str, tenant: str = "t1", **settings) -> None:
    store.agents.create(tenant, AgentDefinition(name=name, settings=Settings(**settings)),
                        now=clock())


def chain(store, clock) -> None:
    """a hands to b, b to c, c answers; every round of each, whatever the round's number."""
    define(store, clock, "c", system="You are C.", script=[{"text": "C answers"}],
           script_repeat=True)
    define(store, clock, "b", system="You are B.", script=[transfer("c", "C knows")],
           script_repeat=True, handoffs=["c"])
    define(store, clock, "a", system="You are A.", script=[transfer("b", "billing question")],
           handoffs=["b"])


def handoffs(store, cid) -> list[tuple]:
    return [(e.content["from"], e.content["to"], e.content["why"], e.content["by"])
            for e in store.log.list_events(cid) if e.type == "handoff"]


def answers(store, cid) -> list[str]:
    return [e.content["text"] for e in store.log.list_events(cid)
            if e.type == "assistant_msg" and e.content["text"]]


def test_a_chain_of_handoffs_in_one_turn_ends_with_the_last_agents_answer(
        store, runtime, commands, clock):
    chain(store, clock)
    conv = commands.create_conversation(ALICE, {}, agent="a")
    _, follow = commands.post_message(conv.id, "why was I charged twice?", ALICE)
    drain(runtime, follow)
    assert handoffs(store, conv.id) == [("a", "b", "billing question", "model"),
                                        ("b", "c", "C knows", "model")]
    assert answers(store, conv.id) == ["C answers"]
    events = store.log.list_events(conv.id)
    assert len({e.turn_id for e in events}) == 1
    held = store.conversations.load(conv.id)
    assert held.fsm.agent["name"] == "c" and held.settings.system == "You are C."
    assert check_conversation(store, conv.id) == []
