"""The sweeper's look for stalled conversations: a running turn or a waiting message that
has not moved, read through indexes of only those (so idle conversations cost nothing)."""
from __future__ import annotations

from datetime import timedelta

from agentq.commands import Commands
from agentq.config import Config
from agentq.core.scope import Scope
from agentq.followups import Advance
from agentq.runtime import Runtime
from agentq.store import NewStep, Store
from agentq.tools import Registry
from tests.support.clock import Clock
from tests.support.drive import Recorder, drain

SCOPE = Scope(tenant="acme", user="u1")
SETTINGS = {"script": [{"text": "done"}], "script_repeat": True}


def stalled(store: Store, clock: Clock) -> set[str]:
    return set(store.backlog.list_stalled_conversations(updated_before=clock() - timedelta(seconds=30),
                                                        now=clock()))


def test_a_turn_or_a_message_left_without_its_task_is_stalled_and_an_idle_conversation_is_not(
    store,
):
    clock = Clock()
    runtime = Runtime(store=store, registry=Registry([]), pubsub=Recorder(), config=Config(),
                      clock=clock, sleep=lambda s: None)
    commands = Commands(store, runtime.registry, clock=clock)
    idle = commands.create_conversation(SCOPE, SETTINGS).id
    drain(runtime, commands.post_message(idle, "hi", SCOPE)[1])
    in_turn = commands.create_conversation(SCOPE, SETTINGS).id
    commands.post_message(in_turn, "hi", SCOPE)  # its advance is lost
    queued = commands.create_conversation(SCOPE, SETTINGS).id
    commands.post_message(queued, "hi", SCOPE)
    commands.post_message(queued, "again", SCOPE)
    # the first turn ends; the advance that would take the waiting message is lost
    assert runtime.advance(queued) == [Advance(queued)]
    assert store.conversations.load(queued).fsm.state != "running"
    slow = commands.create_conversation(SCOPE, SETTINGS).id
    commands.post_message(slow, "hi", SCOPE)
    clock.tick(60)
    step = NewStep("slow-step", slow, "llm", {"after_seq": 0}, None, "task-slow", "acme")
    assert store.steps.schedule_and_claim(step, worker="w", lease_s=30, now=clock(),
                                          max_attempts=5).status == "running"
    recent = commands.create_conversation(SCOPE, SETTINGS).id
    commands.post_message(recent, "hi", SCOPE)
    # the slow one's step runs under a live lease: slow, not stalled
    assert stalled(store, clock) == {in_turn, queued}


def test_an_ended_conversation_is_never_stalled(store):
    clock = Clock()
    commands = Commands(store, Registry([]), clock=clock)
    cid = commands.create_conversation(SCOPE, SETTINGS).id
    commands.post_message(cid, "hi", SCOPE)
    clock.tick(60)
    assert stalled(store, clock) == {cid}
    commands.end(cid, SCOPE)
    clock.tick(60)
    assert stalled(store, clock) == set()
