"""Compaction in the runtime: summaries as snapshots, a bounded context, the log untouched."""
from __future__ import annotations

import threading

from agentq.cli.check import check_conversation
from agentq.commands import Commands
from agentq.config import Config
from agentq.core.budget import EVICTED_NOTE, plan_context
from agentq.core.compaction import request_tokens
from agentq.core.decide import Step
from agentq.core.render import SUMMARY_PREFIX, validate
from agentq.followups import Compact
from agentq.providers.anthropic import messages_body
from agentq.providers.errors import ContextTooLong
from agentq.tenancy.access import provider_for
from agentq.providers.openai_chat import chat_body
from agentq.runtime import Runtime
from agentq.store import NewStep
from agentq.tools import Registry
from agentq.core.scope import Scope
from tests.support.clock import Clock
from tests.support.drive import Recorder, drain
from tests.support.emulators import anthropic_api, openai_api
from tests.support.rules import Rules

SCOPE = Scope(tenant="t1", user="u1")
TOOLS = ["agentq.tools.demo", "tests.support.tools_for_tests"]
HEAVY = [  # turns alternate: ten tool calls, then two; every turn ends in a text answer
    {"text": "Looking.", "tool_calls": [{"name": "lookup", "args": {"key": f"k{i}"}} for i in range(10)]},
    {"text": "Here is what I found about all ten keys."},
    {"tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}, {"name": "noop", "args": {}}]},
    {"text": "Cold, and nothing else to do."},
]


class RecordingProviders:
    """The real provider factory, keeping every request any step sent."""

    def __init__(self, fail_first_without_summary: bool = False) -> None:
        self.requests: list = []
        self.fail_first = fail_first_without_summary

    def __call__(self, settings):
        inner = provider_for(settings)
        outer = self

        class Recording:
            def stream(self, request, ctx, cancel):
                outer.requests.append((ctx.purpose, request))
                summarized = request.messages and request.messages[0].text.startswith(SUMMARY_PREFIX)
                if outer.fail_first and ctx.purpose == "answer" and not summarized:
                    outer.fail_first = False
                    raise ContextTooLong("prompt is too long: 9000 tokens > 8000 maximum",
                                         status=400, code="context_too_long")
                return inner.stream(request, ctx, cancel)

        return Recording()


def make_runtime(store, providers, **config):
    return Runtime(
        store=store, registry=Registry.from_modules(TOOLS), pubsub=Recorder(),
        config=Config(**config), clock=Clock(), rules=Rules(providers=providers), sleep=lambda s: None,
    )


def settings(budget, **more):
    return {"script": HEAVY, "script_repeat": True,
            "compaction": {"max_context_tokens": budget, "min_keep_turns": 2, **more}}


def run_turns(runtime, cid, count):
    commands = Commands(runtime.store, runtime.registry, clock=runtime.clock)
    for turn in range(count):
        _, follow = commands.post_message(cid, f"question {turn}", SCOPE)
        drain(runtime, follow)


def assert_accepted_by_both_providers(request, settings, limit_tokens):
    """validate, and the strict emulators' own checks on each provider's wire body."""
    assert validate(request) == []
    assert openai_api.check(chat_body(request, settings), limit_tokens) is None
    headers = {"anthropic-version": "2023-06-01"}
    assert anthropic_api.check(messages_body(request, settings), headers, limit_tokens) is None


def test_a_long_tool_heavy_conversation_stays_within_budget_and_keeps_every_event(sqlite_store):
    providers = RecordingProviders()
    runtime = make_runtime(sqlite_store, providers)
    commands = Commands(sqlite_store, runtime.registry, clock=runtime.clock)
    budget = 3000
    conv = commands.create_conversation(SCOPE, settings(budget))
    run_turns(runtime, conv.id, 500)

    events = sqlite_store.log.list_events(conv.id)
    assert sum(e.type == "user_msg" for e in events) == 500
    assert sum(e.type == "tool_call" for e in events) == 250 * 10 + 250 * 2
    assert sum(e.type == "tool_result" for e in events) == 250 * 12
    summaries = sqlite_store.log.list_summaries(conv.id)
    assert len(summaries) > 10
    by_seq = {e.seq: e for e in events}
    for earlier, later in zip(summaries, summaries[1:]):
        assert later.from_seq == earlier.to_seq + 1 and later.version == earlier.version + 1
    for summary in summaries:  # docs/design.md §16.2: every cut is just before a user_msg
        assert by_seq[summary.to_seq + 1].type == "user_msg"
    answers = [request for purpose, request in providers.requests if purpose == "answer"]
    assert len(answers) == 1000
    for request in answers:  # the emulators count the whole JSON body: ~4x our text estimate
        assert_accepted_by_both_providers(request, conv.settings, limit_tokens=6 * budget)
    late = [request_tokens(r) for r in answers[-100:]]
    assert max(late) <= 2 * budget  # bounded: it does not grow with the conversation
    assert check_conversation(sqlite_store, conv.id) == []


def test_a_single_turn_longer_than_the_budget_is_never_cut_and_still_answers(sqlite_store):
    providers = RecordingProviders()
    runtime = make_runtime(sqlite_store, providers)
    commands = Commands(sqlite_store, runtime.registry, clock=runtime.clock)
    many = [{"tool_calls": [{"name": "lookup", "args": {"key": f"x{i}"}} for i in range(40)]},
            {"text": "All forty looked up."}]
    conv = commands.create_conversation(SCOPE, {
        "script": [{"text": "warm-up answer"}, {"text": "second answer"}, *many],
        "compaction": {"max_context_tokens": 300, "min_keep_turns": 1},
    })
    run_turns(runtime, conv.id, 3)  # two short turns, then one of 40 calls

    events = sqlite_store.log.list_events(conv.id)
    long_turn_starts = [e.seq for e in events if e.type == "user_msg"][-1]
    summaries = sqlite_store.log.list_summaries(conv.id)
    assert summaries and all(s.to_seq < long_turn_starts for s in summaries)
    assert events[-1].type == "assistant_msg" and events[-1].content["text"] == "All forty looked up."
    last = [r for purpose, r in providers.requests if purpose == "answer"][-1]
    assert sum(len(m.tool_calls) for m in last.messages) == 40
    assert_accepted_by_both_providers(last, conv.settings, limit_tokens=10**6)


def test_context_too_long_from_the_provider_compacts_and_retries_once(sqlite_store):
    providers = RecordingProviders()
    runtime = make_runtime(sqlite_store, providers)
    commands = Commands(sqlite_store, runtime.registry, clock=runtime.clock)
    conv = commands.create_conversation(SCOPE, {"compaction": {"min_keep_turns": 1}})
    run_turns(runtime, conv.id, 3)
    providers.fail_first = True
    run_turns(runtime, conv.id, 1)
    events = sqlite_store.log.list_events(conv.id)
    assert events[-1].content["text"] == "echo: question 0"
    assert "error" not in [e.type for e in events]
    (summary,) = sqlite_store.log.list_summaries(conv.id)
    assert sqlite_store.log.list_events(conv.id, after_seq=summary.to_seq)[0].type == "user_msg"


def test_a_context_too_long_with_nothing_left_to_cut_or_shorten_fails_the_turn(sqlite_store):
    providers = RecordingProviders(fail_first_without_summary=True)
    runtime = make_runtime(sqlite_store, providers)
    commands = Commands(sqlite_store, runtime.registry, clock=runtime.clock)
    conv = commands.create_conversation(SCOPE, {"compaction": {"min_keep_turns": 1}})
    run_turns(runtime, conv.id, 1)
    error = sqlite_store.log.list_events(conv.id)[-1]
    assert error.type == "error" and error.content["code"] == "context_too_long"
    assert sqlite_store.log.list_summaries(conv.id) == []


def test_two_compactions_racing_write_exactly_one_summary(store):
    providers = RecordingProviders()
    runtime = make_runtime(store, providers)
    commands = Commands(store, runtime.registry, clock=runtime.clock)
    conv = commands.create_conversation(SCOPE, settings(400))
    run_turns(runtime, conv.id, 2)
    commands.post_message(conv.id, "one more", SCOPE)
    [compact] = runtime.advance(conv.id)  # the model call must wait for a summary
    assert isinstance(compact, Compact)
    barrier = threading.Barrier(4)

    def race():
        barrier.wait()
        runtime.compact(conv.id, compact.to_seq)

    threads = [threading.Thread(target=race) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    spans = [(s.from_seq, s.to_seq) for s in store.log.list_summaries(conv.id)]
    assert len(spans) == len(set(spans)) >= 1
    compacts = [s for s in store.steps.list_of(conv.id) if s.kind == "compact"]
    assert all(s.attempts == 1 for s in compacts) and len(compacts) == len(spans)


def test_a_compact_step_whose_worker_died_is_taken_over_and_writes_one_summary(store):
    providers = RecordingProviders()
    runtime = make_runtime(store, providers, lease_s=5.0)
    commands = Commands(store, runtime.registry, clock=runtime.clock)
    conv = commands.create_conversation(SCOPE, settings(400))
    before = set()
    for turn in range(12):  # run turns until the next model call needs a summary first
        before = {s.to_seq for s in store.log.list_summaries(conv.id)}
        _, follow = commands.post_message(conv.id, f"question {turn}", SCOPE)
        view = store.log.load_view(conv.id)
        cut = plan_context(view, runtime.registry.specs(view.settings.tools)).cut
        if cut is not None:
            break
        drain(runtime, follow)
    assert cut is not None
    step = Step.compact(conv.id, cut - 1)
    store.steps.schedule_and_claim(NewStep.of(step, conv.id, "dead", tenant=conv.tenant), worker="dead-worker",
                                   lease_s=5.0, now=runtime.clock(), max_attempts=5)
    assert runtime.advance(conv.id) == [Compact(conv.id, cut - 1, step.key)]
    assert runtime.compact(conv.id, cut - 1) == []  # the lease is still the dead worker's
    runtime.clock.tick(6)
    drain(runtime, follow)
    after = [s for s in store.log.list_summaries(conv.id) if s.to_seq not in before]
    assert [s.to_seq for s in after] == [cut - 1]
    assert store.steps.load(step.key).attempts == 2


def test_forking_a_compacted_conversation_inside_a_summarized_span_works(store):
    providers = RecordingProviders()
    runtime = make_runtime(store, providers)
    commands = Commands(store, runtime.registry, clock=runtime.clock)
    conv = commands.create_conversation(SCOPE, {
        "tools": [], "compaction": {"max_context_tokens": 400, "min_keep_turns": 1}
    })
    run_turns(runtime, conv.id, 15)
    summaries = store.log.list_summaries(conv.id)
    starts = [e.seq for e in store.log.list_events(conv.id) if e.type == "user_msg"]
    inside = [(s, seq - 1) for s in summaries for seq in starts if s.from_seq < seq <= s.to_seq]
    assert inside, "no summary spans more than one turn"
    summary, boundary = inside[-1]
    assert summary.from_seq <= boundary < summary.to_seq
    fork = commands.fork(conv.id, SCOPE, at_seq=boundary)
    assert [s.to_seq for s in store.log.list_summaries(fork.id)] == [
        s.to_seq for s in summaries if s.to_seq <= boundary
    ]
    run_turns(runtime, fork.id, 2)
    assert check_conversation(store, fork.id) == []
    assert store.log.list_events(fork.id)[-1].type == "assistant_msg"


def test_an_oversized_tool_result_is_shortened_in_the_context_only_and_audited(sqlite_store):
    providers = RecordingProviders()
    runtime = make_runtime(sqlite_store, providers, audit=True)
    commands = Commands(sqlite_store, runtime.registry, clock=runtime.clock)
    conv = commands.create_conversation(SCOPE, {
        "script": [{"tool_calls": [{"name": "big_result", "args": {"size": 20000}}]}, {"text": "ok"}],
        "compaction": {"max_result_tokens": 100},
    })
    run_turns(runtime, conv.id, 1)
    result = next(e for e in sqlite_store.log.list_events(conv.id) if e.type == "tool_result")
    assert len(result.content["output"]) == 20000  # the log keeps it whole
    last = [r for purpose, r in providers.requests if purpose == "answer"][-1]
    tool_text = next(m.text for m in last.messages if m.role == "tool")
    assert len(tool_text) < 1000 and tool_text.endswith(EVICTED_NOTE.format(evicted=20000 - 400, what="result"))
    answer = sqlite_store.log.list_events(conv.id)[-1]
    (audit,) = [a for a in sqlite_store.audit.list_of(conv.id) if a.step_key == answer.step_key]
    assert audit.evictions == [
        {"kind": "tool_result", "tool_call_id": result.content["tool_call_id"], "chars": 20000,
         "kept_chars": 400}
    ]
