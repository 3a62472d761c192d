"""A worker's transcripts: every model call of a conversation sends what a full render gives,
through tools, people, interrupts, summaries and settings changes; the cache is bounded."""
from __future__ import annotations

from dataclasses import replace

import pytest

from agentq.commands import Commands
from agentq.config import Config
from agentq.core.budget import plan_context
from agentq.tenancy.access import provider_for
from agentq.runtime import Runtime
from agentq.runtime.transcripts import Transcripts
from agentq.store.schema import conversations
from agentq.tools import Registry
from agentq.core.scope import Scope
from tests.support.clock import Clock
from tests.core import builders as b
from tests.support.drive import Recorder, drain
from tests.support.rules import Rules

SCOPE = Scope(tenant="t1", user="u1")
SCRIPT = [
    {"text": "Looking.", "tool_calls": [{"name": "lookup", "args": {"key": "a"}},
                                        {"name": "noop", "args": {}}]},
    {"text": "Found it; may I pay?", "tool_calls": [{"name": "approve", "args": {"amount": 5}}]},
    {"text": "Paid."},
]


class CheckedProviders:
    """The real providers; each answer's request is checked against a full render of the
    view the store holds at that moment."""

    def __init__(self, store, registry) -> None:
        self.store, self.registry = store, registry
        self.checked = 0

    def __call__(self, settings):
        inner, outer = provider_for(settings), self

        class Checked:
            def stream(self, request, ctx, cancel):
                if ctx.purpose == "answer":
                    outer.check(ctx.conversation_id, request)
                return inner.stream(request, ctx, cancel)

        return Checked()

    def check(self, conversation_id, request) -> None:
        with self.store.log.reader(conversation_id) as reader:
            view = reader.with_history(reader.view(turn_only=True))
        assert request == plan_context(view, self.registry.specs(view.settings.tools)).request
        self.checked += 1


def system_prompt(store, cid: str, text: str) -> None:
    """Change a conversation's settings under it, as an operator's edit of its row would."""
    settings = store.conversations.load(cid).settings.model_copy(update={"system": text})
    with store.engine.begin() as conn:
        conn.execute(conversations.update().where(conversations.c.id == cid)
                     .values(settings=settings.model_dump(mode="json")))


def pending_call(store, cid: str) -> str | None:
    pending = store.conversations.load(cid).fsm.pending
    return next(iter(pending), None)


@pytest.mark.parametrize("budget", [None, 700])
def test_every_model_call_sends_what_a_full_render_of_its_view_gives(store, budget):
    registry = Registry.from_modules(["agentq.tools.demo", "tests.support.tools_for_tests"])
    providers = CheckedProviders(store, registry)
    runtime = Runtime(store=store, registry=registry, pubsub=Recorder(), config=Config(),
                      clock=Clock(), rules=Rules(providers=providers), sleep=lambda s: None)
    commands = Commands(store, registry, clock=runtime.clock)
    conv = commands.create_conversation(SCOPE, {
        "script": SCRIPT, "script_repeat": True,
        "compaction": {"max_context_tokens": budget, "min_keep_turns": 2},
    })
    for turn in range(15):
        drain(runtime, commands.post_message(conv.id, f"question {turn}", SCOPE)[1])
        call_id = pending_call(store, conv.id)
        if call_id is None:
            continue
        if turn % 3 == 0:  # a person answers
            _, follow = commands.resolve(conv.id, call_id, SCOPE, status="resolved", result="ok")
            drain(runtime, follow)
        elif turn % 3 == 1:  # or the next message interrupts the turn that waits for one
            drain(runtime, commands.post_message(conv.id, "never mind", SCOPE,
                                                 on_busy="interrupt")[1])
        else:  # or the operator changes the system prompt while it waits
            system_prompt(store, conv.id, f"Be brief, {turn}.")
            _, follow = commands.resolve(conv.id, call_id, SCOPE, status="errored", result="no")
            drain(runtime, follow)
    assert bool(store.log.list_summaries(conv.id)) == (budget is not None)  # it summarized on the way
    assert providers.checked >= 24


def test_a_worker_keeps_the_transcripts_of_the_conversations_it_stepped_last():
    events = b.log(b.user("q1"), b.assistant("a1"), b.user("q2"))
    transcripts = Transcripts(2)
    for cid in ("a", "b", "c"):
        view = replace(b.view(events), conversation_id=cid)
        assert transcripts.render(view) == plan_context(view).rendered
    assert transcripts._get("a") is None and transcripts._get("c")[0].through_seq == 2


def test_no_transcript_is_kept_when_the_event_cache_is_off():
    view = b.view(b.log(b.user("q1"), b.assistant("a1"), b.user("q2")))
    transcripts = Transcripts(0)
    assert transcripts.render(view) == plan_context(view).rendered
    assert transcripts._get(view.conversation_id) is None


def test_transcripts_are_also_bounded_by_their_weight_the_least_recently_used_going_first():
    turns = [m for n in range(30) for m in (b.user(f"question {n} " * 20), b.assistant(f"answer {n} " * 20))]
    view = b.view(b.log(*turns, b.user("last")))
    one = Transcripts(10)
    one.render(view)
    heavy = one.bytes
    transcripts = Transcripts(10, max_bytes=heavy * 2 + heavy // 2)
    for cid in ("a", "b", "c"):
        assert transcripts.render(replace(view, conversation_id=cid)) == plan_context(view).rendered
    assert len(transcripts) == 2 and transcripts._get("a") is None
    assert 1.9 * heavy < transcripts.bytes <= transcripts.max_bytes  # ids of other lengths
    small = Transcripts(10, max_bytes=heavy // 2)
    assert small.render(view) == plan_context(view).rendered  # too heavy to keep, still right
    assert len(small) == 0 and small.bytes == 0
