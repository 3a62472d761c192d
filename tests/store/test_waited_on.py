"""The `waited_on` flag (agentq.store.waits): a step's commit reads what its freed slot wakes
only when a step of its tenant may wait for that slot, and no wake-up is lost for it."""
from __future__ import annotations

import threading

import pytest
from sqlalchemy import select

from agentq.commands import Commands
from agentq.config import Config
from agentq.core.events import EventDraft, FsmState
from agentq.runtime import Runtime
from agentq.store import Store, dialects
from agentq.store.schema import steps
from agentq.store.whole_commit import SeeingInbox
from tests.store.test_shares import (
    ANSWER,
    SCOPE,
    Recorder,
    Registry,
    Rules,
    claim,
    conversation,
    drain,
    idle_with_answer,
)
from tests.support.clock import Clock


def waited_on(store: Store, key: str) -> bool:
    with store.engine.connect() as conn:
        return conn.execute(select(steps.c.waited_on).where(steps.c.step_key == key)).scalar_one()


def test_a_claim_while_no_step_of_its_tenant_waits_leaves_its_step_unmarked(store):
    cid = conversation(store)
    assert claim(store, cid, "a", cap=2).status == "running"
    assert claim(store, cid, "b", cap=2).status == "running"
    assert not waited_on(store, "a") and not waited_on(store, "b")


def test_a_claim_that_takes_a_slot_while_a_step_of_its_tenant_waits_is_marked(store):
    cid = conversation(store)
    assert claim(store, cid, "a", cap=1).status == "running"
    assert claim(store, cid, "b", cap=1, seconds=1).status == "waiting"
    # another process that read a larger share for the moment lets this one run
    assert claim(store, cid, "c", cap=3, seconds=2).status == "running"
    assert waited_on(store, "c") and not waited_on(store, "a")


MODEL = ("llm", "compact")


def test_an_uncapped_claim_on_a_shared_queue_is_marked_only_while_a_step_of_its_kinds_waits(store):
    """A process that sees no slots for the queue yet claims uncapped; its step's end reads
    what it wakes only if a step of its tenant and kinds waits for a slot then."""
    cid = conversation(store)
    assert claim(store, cid, "quiet", cap=None, kinds=MODEL).status == "running"
    assert not waited_on(store, "quiet")
    assert claim(store, cid, "waits", cap=1, kinds=MODEL, seconds=2).status == "waiting"
    assert claim(store, cid, "tool", cap=None, kinds=("tool",), kind="tool", seconds=3
                 ).status == "running"
    assert claim(store, cid, "busy", cap=None, kinds=MODEL, seconds=4).status == "running"
    assert [waited_on(store, key) for key in ("quiet", "tool", "busy")] == [False, False, True]


def test_an_uncapped_claim_with_no_queue_known_is_always_marked(store):
    cid = conversation(store)
    assert claim(store, cid, "a", cap=None).status == "running"
    assert waited_on(store, "a")


def test_a_step_left_waiting_marks_the_running_steps_of_its_tenant_and_kinds_only(store):
    acme, other = conversation(store), conversation(store, tenant="other")
    claim(store, acme, "llm", cap=None)
    claim(store, acme, "tool", cap=None, kind="tool")
    claim(store, other, "elsewhere", cap=None, tenant="other")
    for key in ("llm", "tool", "elsewhere"):  # uncapped claims mark their own steps
        with store.engine.begin() as conn:
            conn.execute(steps.update().where(steps.c.step_key == key).values(waited_on=False))
    assert store.steps.mark_waited_on("acme", ("llm", "compact")) == 1
    assert [waited_on(store, key) for key in ("llm", "tool", "elsewhere")] == [True, False, False]
    assert store.steps.mark_waited_on("acme", ("llm", "compact")) == 0  # marked once


def answer() -> EventDraft:
    return EventDraft(type="assistant_msg", content={"text": "done"}, turn_id="t1",
                      round_id="r1", created_at=Clock()())


def commit(store: Store, cid: str, key: str):
    return store.writes.commit_step(cid, [answer()], next_seq=1,
                                    state_after=lambda _: FsmState(state="idle"), step_key=key,
                                    worker="w1", finish=SeeingInbox(), now=Clock()())


def test_a_commit_says_whether_its_step_was_waited_on_where_it_can_tell(store):
    quiet, busy = conversation(store), conversation(store)
    claim(store, busy, "busy", cap=5)
    store.steps.mark_waited_on("acme", None)
    claim(store, quiet, "quiet", cap=5)
    one_statement = store.engine.dialect.name == "postgresql"
    # the transactional commit cannot tell, and says so: its caller reads the backlog
    assert commit(store, quiet, "quiet").waited_on is not one_statement
    assert commit(store, busy, "busy").waited_on is True


@pytest.mark.postgres
def test_a_mark_made_while_a_commit_runs_is_seen_by_that_commit(pg_store_clean):
    """The mark holds the step's row when the commit's finish reaches it: the finish waits,
    then updates the newest version of the row, flag and all."""
    store = pg_store_clean
    cid = conversation(store)
    claim(store, cid, "a", cap=5)
    result: list = []
    with store.engine.connect() as marking:
        marking.execution_options(**dialects.of(marking).write_options(one_statement=False))
        marking.begin()
        marking.execute(steps.update().where(steps.c.step_key == "a").values(waited_on=True))
        committing = threading.Thread(target=lambda: result.append(commit(store, cid, "a")))
        committing.start()
        committing.join(1.0)
        assert committing.is_alive() and result == []  # waits for the mark's row lock
        marking.commit()
    committing.join(30)
    assert result and result[0].waited_on is True


@pytest.mark.postgres
def test_a_mark_that_waits_for_a_commit_finds_the_step_finished_and_marks_nothing(
    pg_store_clean,
):
    store = pg_store_clean
    cid = conversation(store)
    claim(store, cid, "a", cap=5)
    with store.engine.connect() as finishing:
        finishing.execution_options(**dialects.of(finishing).write_options(one_statement=False))
        finishing.begin()
        finishing.execute(steps.update().where(steps.c.step_key == "a")
                          .values(status="succeeded", lease_until=None))
        marked: list[int] = []
        marking = threading.Thread(
            target=lambda: marked.append(store.steps.mark_waited_on("acme", None)))
        marking.start()
        marking.join(1.0)
        assert marking.is_alive()
        finishing.commit()
    marking.join(30)
    assert marked == [0] and not waited_on(store, "a")


def test_a_lone_turns_steps_read_nothing_for_the_slots_they_free_where_commits_can_tell(
    store, monkeypatch
):
    runtime = Runtime(store=store, registry=Registry([]), pubsub=Recorder(), config=Config(),
                      clock=Clock(), sleep=lambda s: None,
                      rules=Rules(running=lambda tenant: 2))
    commands = Commands(runtime.store, runtime.registry, clock=runtime.clock)
    reads: list[str] = []
    next_waiting = store.backlog.next_waiting_steps

    def counted_read(tenant, kinds):
        reads.append(tenant)
        return next_waiting(tenant, kinds)

    monkeypatch.setattr(store.backlog, "next_waiting_steps", counted_read)
    cid = commands.create_conversation(SCOPE, {"script": ANSWER}).id
    _, follow = commands.post_message(cid, "hi", SCOPE)
    drain(runtime, follow)
    assert idle_with_answer(store, cid)
    assert len(reads) == (0 if store.engine.dialect.name == "postgresql" else 1)
