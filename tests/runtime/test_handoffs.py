"""Handoffs on a real store (SQLite and Postgres), follow-ups run in-process: a model's
transfer call passes the conversation to another agent in the same turn, later turns go to
the agent that holds it, and a person hands it back through the commands."""
from __future__ import annotations

from datetime import timedelta

import pytest

import agentq
from agentq.agents import CodeAgents
from agentq.agents.catalog import Catalog

from agentq.cli.check import check_conversation
from agentq.commands import Commands
from agentq.commands.handoffs import HandoffCommands
from agentq.config import Config
from agentq.core.agents import AgentDefinition
from agentq.core.scope import Scope
from agentq.core.settings import Settings
from agentq.errors import Conflict, InvalidInput
from agentq.providers.scripted import ScriptedProvider
from agentq.runtime import Runtime
from agentq.tools import Registry
from tests.support.drive import Recorder, drain
from tests.support.rules import Rules
from tests.support.turn_fixtures import clock, commands, providers, runtime  # noqa: F401

ALICE = Scope(tenant="t1", user="alice")


def transfer(to: str, reason: str = "theirs to answer") -> dict:
    return {"tool_calls": [{"name": f"transfer_to_{to}", "args": {"reason": reason}}]}


def define(store, clock, name: str, tenant: str = "t1", **settings) -> None:
    store.agents.create(tenant, AgentDefinition(name=name, settings=Settings(**settings)),
                        now=clock())


def chain(store, clock) -> None:
    """a hands to b, b to c, c answers; every round of each, whatever the round's number."""
    define(store, clock, "c", system="You are C.", script=[{"text": "C answers"}],
           script_repeat=True)
    define(store, clock, "b", system="You are B.", script=[transfer("c", "C knows")],
           script_repeat=True, handoffs=["c"])
    define(store, clock, "a", system="You are A.",
           script=[transfer("b", "billing question"), *[{"text": "A again"}] * 9],
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


def test_the_next_turn_goes_to_the_agent_that_holds_the_conversation(
        store, runtime, commands, clock):
    chain(store, clock)
    conv = commands.create_conversation(ALICE, {}, agent="a")
    drain(runtime, commands.post_message(conv.id, "charged twice", ALICE)[1])
    drain(runtime, commands.post_message(conv.id, "and a refund?", ALICE)[1])
    assert len(handoffs(store, conv.id)) == 2  # no new handoff: C answered at once
    assert answers(store, conv.id) == ["C answers", "C answers"]


def test_a_person_hands_the_conversation_back_to_the_agent_it_started_with(
        store, runtime, commands, clock):
    chain(store, clock)
    conv = commands.create_conversation(ALICE, {}, agent="a")
    drain(runtime, commands.post_message(conv.id, "charged twice", ALICE)[1])
    HandoffCommands(commands).hand_off(conv.id, ALICE, to="a", why="sorted out")
    assert handoffs(store, conv.id)[-1] == ("c", "a", "sorted out", "person")
    back = store.conversations.load(conv.id)
    assert back.settings.system == "You are A." and back.fsm.agent["name"] == "a"
    assert back.fsm.agent["settings"] is None
    drain(runtime, commands.post_message(conv.id, "thanks", ALICE)[1])
    assert store.log.list_events(conv.id)[-1].content["text"] == "A again"
    assert check_conversation(store, conv.id) == []


def test_a_person_cannot_hand_over_a_conversation_while_its_turn_runs(
        store, runtime, commands, clock):
    chain(store, clock)
    conv = commands.create_conversation(ALICE, {}, agent="a")
    commands.post_message(conv.id, "charged twice", ALICE)
    with pytest.raises(Conflict):
        HandoffCommands(commands).hand_off(conv.id, ALICE, to="c")
    assert handoffs(store, conv.id) == []


def test_a_person_cannot_hand_a_conversation_to_another_tenants_agent(
        store, runtime, commands, clock):
    chain(store, clock)
    define(store, clock, "secret", tenant="t2", system="t2's own")
    conv = commands.create_conversation(ALICE, {}, agent="a")
    with pytest.raises(InvalidInput) as refused:
        HandoffCommands(commands).hand_off(conv.id, ALICE, to="secret")
    assert refused.value.code == "unknown_agent"
    assert handoffs(store, conv.id) == []


def two_versions(store, clock) -> None:
    """Agent a at version 1, then its version 2 with another prompt and answer."""
    define(store, clock, "a", system="You are A.", script=[{"text": "A one"}], script_repeat=True)
    store.agents.add_version("t1", AgentDefinition(name="a", settings=Settings(
        system="You are A, two.", script=[{"text": "A two"}], script_repeat=True)), now=clock())


def held(store, cid) -> tuple:
    info = store.conversations.load(cid)
    return info.fsm.agent["name"], info.fsm.agent["version"], info.settings.system


def test_a_person_moves_a_conversation_to_a_newer_version_of_its_own_agent(
        store, runtime, commands, clock):
    two_versions(store, clock)
    conv = commands.create_conversation(ALICE, {}, agent="a@1")
    drain(runtime, commands.post_message(conv.id, "hello", ALICE)[1])
    HandoffCommands(commands).hand_off(conv.id, ALICE, to="a@2", why="deployed v2")
    assert handoffs(store, conv.id) == [("a", "a", "deployed v2", "person")]
    assert held(store, conv.id) == ("a", 2, "You are A, two.")
    drain(runtime, commands.post_message(conv.id, "again", ALICE)[1])
    assert answers(store, conv.id) == ["A one", "A two"]
    assert store.conversations.load(conv.id).agent.version == 1  # where it started, kept
    assert check_conversation(store, conv.id) == []


def test_a_person_moves_a_conversation_back_to_the_version_it_started_with(
        store, runtime, commands, clock):
    two_versions(store, clock)
    conv = commands.create_conversation(ALICE, {}, agent="a@1")
    HandoffCommands(commands).hand_off(conv.id, ALICE, to="a@2")
    HandoffCommands(commands).hand_off(conv.id, ALICE, to="a@1")
    assert held(store, conv.id) == ("a", 1, "You are A.")
    assert store.conversations.load(conv.id).fsm.agent["settings"] is None


def test_a_conversation_is_not_moved_to_a_version_it_holds_or_that_is_not_the_tenants(
        store, runtime, commands, clock):
    two_versions(store, clock)
    define(store, clock, "secret", tenant="t2", system="t2's own")
    conv = commands.create_conversation(ALICE, {}, agent="a@1")
    with pytest.raises(Conflict) as same:
        HandoffCommands(commands).hand_off(conv.id, ALICE, to="a@1")
    assert same.value.code == "already_held"
    for target in ("a@9", "secret@1"):
        with pytest.raises(InvalidInput) as refused:
            HandoffCommands(commands).hand_off(conv.id, ALICE, to=target)
        assert refused.value.code == "unknown_agent"
    with pytest.raises(InvalidInput) as malformed:
        HandoffCommands(commands).hand_off(conv.id, ALICE, to="a@x")
    assert malformed.value.code == "invalid_agent"
    assert handoffs(store, conv.id) == []


def test_settings_may_not_name_another_tenants_agent_as_a_handoff(store, commands, clock):
    define(store, clock, "secret", tenant="t2")
    with pytest.raises(InvalidInput) as refused:
        commands.create_conversation(ALICE, {"handoffs": ["secret"]})
    assert refused.value.code == "unknown_agent"


def test_a_transfer_the_agent_does_not_offer_gives_the_model_an_error_result(
        store, runtime, commands, clock):
    chain(store, clock)
    conv = commands.create_conversation(
        ALICE, {"handoffs": ["b"], "script": [transfer("c"), {"text": "staying"}]})
    drain(runtime, commands.post_message(conv.id, "hi", ALICE)[1])
    (call,) = store.calls.list_of(conv.id)
    assert call.result["status"] == "error" and "transfer_to_c" in call.result["output"]
    assert handoffs(store, conv.id) == [] and answers(store, conv.id) == ["staying"]


def test_only_the_first_transfer_of_a_response_is_taken_and_its_other_calls_do_not_run(
        store, runtime, commands, clock):
    chain(store, clock)
    both = {"tool_calls": [{"name": "transfer_to_b", "args": {"reason": "first"}},
                           {"name": "transfer_to_c", "args": {"reason": "second"}},
                           {"name": "noop", "args": {}}]}
    conv = commands.create_conversation(
        ALICE, {"handoffs": ["b", "c"], "tools": ["noop"], "script": [both]})
    drain(runtime, commands.post_message(conv.id, "hi", ALICE)[1])
    first_round = next(e.round_id for e in store.log.list_events(conv.id)
                       if e.type == "assistant_msg")
    results = {c.name: c.result for c in store.calls.list_of(conv.id)
               if c.round_id == first_round}
    assert results["transfer_to_b"] == {"status": "ok", "output": {"handed_off_to": "b"}}
    assert results["transfer_to_c"]["status"] == "error"
    assert results["noop"]["status"] == "error" and "not run" in results["noop"]["output"]
    assert [h[1] for h in handoffs(store, conv.id)][0] == "b"


def test_running_the_model_step_twice_records_the_handoff_once(
        store, runtime, commands, clock):
    chain(store, clock)
    conv = commands.create_conversation(ALICE, {}, agent="a")
    _, follow = commands.post_message(conv.id, "charged twice", ALICE)
    (first,) = follow
    again = runtime.advance(conv.id)  # the same step, delivered twice
    pending = list(again) + list(runtime.advance(conv.id))
    drain(runtime, pending + [first])
    assert handoffs(store, conv.id) == [("a", "b", "billing question", "model"),
                                        ("b", "c", "C knows", "model")]
    assert check_conversation(store, conv.id) == []


def test_a_fork_from_before_a_handoff_runs_with_the_conversations_own_settings(
        store, runtime, commands, clock):
    chain(store, clock)
    conv = commands.create_conversation(ALICE, {}, agent="c")
    drain(runtime, commands.post_message(conv.id, "hello", ALICE)[1])
    HandoffCommands(commands).hand_off(conv.id, ALICE, to="a")
    handed_at = store.conversations.load(conv.id).next_seq - 1
    assert store.conversations.load(conv.id).settings.system == "You are A."
    fork = commands.fork(conv.id, ALICE, at_seq=handed_at - 1)
    assert store.conversations.load(fork.id).settings.system == "You are C."
    whole = commands.fork(conv.id, ALICE, at_seq=handed_at)
    assert store.conversations.load(whole.id).settings.system == "You are A."


class Listening(ScriptedProvider):
    """The scripted model, keeping every request it is sent."""

    def __init__(self) -> None:
        self.requests: list = []

    def stream(self, request, ctx, cancel):
        self.requests.append(request)
        yield from super().stream(request, ctx, cancel)


def test_the_agent_taking_over_with_no_tools_is_sent_no_earlier_tool_call(store, clock):
    model = Listening()
    registry = Registry.from_modules(["agentq.tools.demo", "tests.support.tools_for_tests"])
    runtime = Runtime(store=store, registry=registry, pubsub=Recorder(),
                      config=Config(lease_s=30.0), clock=clock, sleep=lambda s: None,
                      rules=Rules(providers=lambda settings: model))
    commands = Commands(store, registry, clock=clock, close_round=runtime.pubsub.close_round)
    define(store, clock, "b", system="You are B.", script=[{"text": "B answers"}],
           script_repeat=True)
    conv = commands.create_conversation(ALICE, {
        "tools": ["noop"], "handoffs": [{"name": "b", "input_filter": "no_tools"}],
        "script": [{"tool_calls": [{"name": "noop", "args": {}}]}, {"text": "A answers"},
                   transfer("b")]})
    drain(runtime, commands.post_message(conv.id, "hi", ALICE)[1])
    drain(runtime, commands.post_message(conv.id, "billing?", ALICE)[1])
    drain(runtime, commands.post_message(conv.id, "again", ALICE)[1])
    called = [[c.name for m in r.messages for c in m.tool_calls] for r in model.requests]
    assert called[:3] == [[], ["noop"], ["noop"]]  # a sees its own calls
    assert called[3:] == [[], []]  # b, in that turn and the next, sees none of a's calls
    assert [r.system for r in model.requests][3:] == ["You are B.", "You are B."]
    assert answers(store, conv.id) == ["A answers", "B answers", "B answers"]


def only_user_messages(events):
    """A handoff input filter of the code: the target sees only what the user said before."""
    return [e for e in events if e.type == "user_msg"]


def test_an_input_filter_of_the_code_decides_what_the_target_is_sent(store, clock):
    billing = agentq.agent("billing", system="You are billing.", script=[{"text": "Billed."}],
                           script_repeat=True)
    support = agentq.agent("support", handoffs=[
        agentq.handoff(billing, input_filter=only_user_messages)], script=[
        {"text": "Let me look.", "tool_calls": [{"name": "noop", "args": {}}]},
        transfer("billing")], tools=["noop"])
    code = CodeAgents([support, billing])
    model = Listening()
    registry = Registry.from_modules(["agentq.tools.demo", "tests.support.tools_for_tests"])
    rules = Rules(providers=lambda s: model, filters=code.input_filters)
    runtime = Runtime(store=store, registry=registry, pubsub=Recorder(), config=Config(),
                      clock=clock, sleep=lambda s: None, rules=rules)
    catalog = Catalog.published(store, lambda name, tenant: True, code, now=clock())
    commands = Commands(store, registry, clock=clock, catalog=catalog)
    conv = commands.create_conversation(ALICE, {}, agent="support")
    drain(runtime, commands.post_message(conv.id, "charged twice", ALICE)[1])
    to_billing = model.requests[2]
    assert to_billing.system == "You are billing."
    assert [(m.role, m.text) for m in to_billing.messages][0] == ("user", "charged twice")
    assert "Let me look." not in str(to_billing.messages)  # support's words were filtered out
    assert answers(store, conv.id)[-1] == "Billed."


def test_a_tenants_settings_cannot_name_an_input_filter_of_the_code(store, commands, clock):
    define(store, clock, "b")
    with pytest.raises(InvalidInput) as refused:
        commands.create_conversation(ALICE, {"handoffs": [
            {"name": "b", "input_filter": "code:only_user_messages"}]})
    assert refused.value.code == "forbidden_setting"


class Refusing(Rules):
    """Rules under which no agent's settings are admitted any more."""

    def settings_for(self, settings, tenant, *, from_code=False):
        raise InvalidInput("the profile is closed to you", code="unknown_profile")


def test_a_target_whose_settings_are_refused_now_gives_the_transfer_an_error_result(
        store, clock, commands):
    define(store, clock, "b", system="You are B.")
    registry = Registry.from_modules(["agentq.tools.demo", "tests.support.tools_for_tests"])
    runtime = Runtime(store=store, registry=registry, pubsub=Recorder(), config=Config(),
                      clock=clock, sleep=lambda s: None, rules=Refusing())
    conv = commands.create_conversation(ALICE, {"handoffs": ["b"],
                                                "script": [transfer("b"), {"text": "stayed"}]})
    drain(runtime, commands.post_message(conv.id, "hi", ALICE)[1])
    (call,) = store.calls.list_of(conv.id)
    assert call.result == {"status": "error", "output": "cannot hand off: the agent 'b' cannot "
                                                        "start: the profile is closed to you"}
    assert handoffs(store, conv.id) == [] and answers(store, conv.id) == ["stayed"]


def _calls_by_agent(store, clock) -> dict:
    start = clock() - timedelta(days=1)
    rows = store.usage.report(tenant="t1", start=start, end=start + timedelta(days=2),
                              group_by="day", by=["agent"], limit=10)
    return {row.keys["agent"]: row.tokens.calls for row in rows}


def test_a_turns_usage_after_a_handoff_counts_under_the_agent_that_made_each_call(
        store, runtime, commands, clock):
    chain(store, clock)
    conv = commands.create_conversation(ALICE, {}, agent="a")
    drain(runtime, commands.post_message(conv.id, "why was I charged twice?", ALICE)[1])
    assert _calls_by_agent(store, clock) == {"a": 1, "b": 1, "c": 1}
    drain(runtime, commands.post_message(conv.id, "and now?", ALICE)[1])
    assert _calls_by_agent(store, clock) == {"a": 1, "b": 1, "c": 2}
