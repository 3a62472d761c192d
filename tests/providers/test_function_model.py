"""Model functions on a real store (SQLite and Postgres), follow-ups run in-process: an
agent's model is a function of the request, so it reacts to an approval, a rejection or a
tool's error, streams its text, keeps the scripted provider's deterministic call ids and
retries, and fails the turn plainly when the function itself fails."""
from __future__ import annotations

import pytest

import agentq
from agentq.agents import CodeAgents
from agentq.agents.catalog import Catalog
from agentq.commands import Commands
from agentq.config import Config
from agentq.core.keys import scripted_call_id
from agentq.core.scope import Scope
from agentq.core.settings import FUNCTION_PROFILE
from agentq.providers.function import FunctionModel, FunctionModels, ModelRequest
from agentq.runtime import Runtime
from agentq.tenancy.access import ModelAccess
from agentq.tenancy.policy import Policy
from agentq.tools import Registry
from tests.support import function_agents, tools_for_tests
from tests.support.clock import Clock
from tests.support.drive import Recorder, drain
from tests.support.rules import Rules

ALICE = Scope(tenant="t1", user="alice")
PERSON = Scope(tenant="t1", user="bob")


def flaky(request: ModelRequest):
    """Fails its first two attempts with a 503, as a script's `fail` says, then answers."""
    function_agents.ASKED.append(request)
    return {"text": "third time lucky", "fail": {"status": 503, "times": 2}}


def broken(request: ModelRequest):
    raise KeyError("no such order")


def odd(request: ModelRequest):
    return 42


def chatty(request: ModelRequest):
    """A long answer to every question, so the context soon needs a summary."""
    function_agents.ASKED.append(request)
    return f"About {request.text}: " + "many words " * 40


EXTRA = [agentq.agent("flaky", model=flaky), agentq.agent("broken", model=broken),
         agentq.agent("odd", model=odd),
         agentq.agent("chatty", model=chatty,
                      compaction={"max_context_tokens": 300, "min_keep_turns": 1})]


@pytest.fixture(autouse=True)
def forget_requests():
    function_agents.ASKED.clear()


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def code():
    registry = Registry.from_modules(["agentq.tools.demo", "tests.support.tools_for_tests"])
    modules = CodeAgents.from_modules(["tests.support.function_agents"], registry)
    return registry, CodeAgents([*modules, *EXTRA])


@pytest.fixture
def runtime(store, clock, code):
    registry, agents = code
    access = ModelAccess(Policy.default(), functions=agents.functions)
    return Runtime(store=store, registry=registry, pubsub=Recorder(),
                   config=Config(lease_s=30.0, delta_window_s=0), clock=clock, sleep=lambda s: None,
                   rules=Rules(providers=access.provider_for, policy=Policy.default()))


@pytest.fixture
def commands(runtime, clock, code):
    catalog = Catalog.published(runtime.store, lambda name, tenant: True, code[1], now=clock())
    return Commands(runtime.store, runtime.registry, clock=clock,
                    close_round=runtime.pubsub.close_round, catalog=catalog)


def ask(commands, runtime, agent: str, text: str = "refund my order") -> str:
    cid = commands.create_conversation(ALICE, {}, agent=agent).id
    drain(runtime, commands.post_message(cid, text, ALICE)[1])
    return cid


def gated(store, cid):
    (call_id,) = store.conversations.load(cid).fsm.pending
    return store.calls.load(cid, call_id)


def answer(store, cid) -> str:
    return [e for e in store.log.list_events(cid) if e.type == "assistant_msg"][-1].content["text"]


def test_a_code_agents_function_is_its_model_named_in_its_settings(store, commands):
    cid = commands.create_conversation(ALICE, {}, agent="refunder").id
    settings = store.conversations.load(cid).settings
    assert (settings.profile, settings.model) == (FUNCTION_PROFILE, "refunds")


def test_after_a_rejection_the_function_reads_the_refusal_and_answers_with_its_reason(
    store, runtime, commands
):
    cid = ask(commands, runtime, "refunder")
    call = gated(store, cid)
    assert call.needs_approval and function_agents.ASKED[0].results == ()
    drain(runtime, commands.resolve(cid, call.id, PERSON, status="rejected", result=None,
                                    reason="over the limit")[1])
    (result,) = function_agents.ASKED[-1].results
    assert (result.call_id, result.name, result.status) == (call.id, "issue_refund", "rejected")
    assert result.args == {"order": "A-17", "amount": 1299.0}
    assert result.text == "a person refused this call: over the limit. The tool did not run."
    assert answer(store, cid) == f"No refund: {result.text}"
    assert tools_for_tests.CALLS.get(f"issue_refund:{call.id}", 0) == 0


def test_after_an_approval_the_function_reads_what_the_tool_returned(store, runtime, commands):
    cid = ask(commands, runtime, "refunder")
    call = gated(store, cid)
    drain(runtime, commands.resolve(cid, call.id, PERSON, status="approved", result=None)[1])
    (result,) = function_agents.ASKED[-1].results
    assert (result.status, result.text) == ("ok", "refunded 1299.00 on order A-17")
    assert answer(store, cid) == "Done: refunded 1299.00 on order A-17"
    assert tools_for_tests.CALLS[f"issue_refund:{call.id}"] == 1


def test_a_tools_error_reaches_the_function_with_its_status(store, runtime, commands):
    cid = ask(commands, runtime, "refunder", "explode, please")
    (result,) = function_agents.ASKED[-1].results
    assert (result.name, result.status) == ("explode", "error")
    assert answer(store, cid) == f"explode went wrong (error): {result.text}"
    assert result.text == "RuntimeError: the tool exploded"


def test_the_function_is_asked_what_a_model_would_be_sent(store, runtime, commands):
    ask(commands, runtime, "refunder", "refund order A-17")
    first = function_agents.ASKED[0]
    assert first.text == "refund order A-17" and first.attempt == 1 and first.rounds == 0
    assert {t.name for t in first.tools} == {"issue_refund", "explode"}
    assert [m.role for m in first.messages] == ["user"]


def test_its_call_ids_derive_from_the_step_key_and_its_text_streams_in_its_chunks(
    store, runtime, commands
):
    cid = ask(commands, runtime, "refunder")
    (call_event,) = [e for e in store.log.list_events(cid) if e.type == "tool_call"]
    assert call_event.content["tool_call_id"] == scripted_call_id(call_event.step_key, 0)
    deltas = [d for kind, d in runtime.pubsub.notices if kind == "delta"]
    assert [d["index"] for d in deltas] == [0, 1, 2]
    assert "".join(d["text"] for d in deltas) == "I will refund order A-17."
    assert {d["round_id"] for d in deltas} == {call_event.round_id}


def test_a_failed_attempt_is_retried_and_the_function_sees_each_attempt(store, runtime, commands):
    cid = ask(commands, runtime, "flaky", "hello")
    assert [r.attempt for r in function_agents.ASKED] == [1, 2, 3]
    assert answer(store, cid) == "third time lucky"
    retries = [d for kind, d in runtime.pubsub.notices if kind == "retry"]
    assert [r["attempt"] for r in retries] == [1, 2] and all(r["transient"] for r in retries)


@pytest.mark.parametrize(("agent", "said"), [
    ("broken", "the model function broken raised KeyError: 'no such order'"),
    ("odd", "the model function odd answered neither text nor an answer shaped as a script's"),
])
def test_a_function_that_fails_fails_the_turn_saying_why(store, runtime, commands, agent, said):
    cid = ask(commands, runtime, agent, "hello")
    (error,) = [e for e in store.log.list_events(cid) if e.type == "error"]
    assert error.content["code"] == "model_function_failed"
    assert error.content["message"].startswith(said)
    assert store.conversations.load(cid).fsm.state == "failed"


def test_a_code_agent_with_a_function_model_runs_as_a_sub_agent(store, runtime, commands):
    cid = ask(commands, runtime, "lead", "refund A-17")
    (child,) = [c.id for c in store.conversations.list_descendants(cid)]
    assert store.conversations.load(child).settings.model == "refunds"
    refund = gated(store, child)
    drain(runtime, commands.resolve(child, refund.id, PERSON, status="rejected", result=None,
                                    reason="no")[1])
    assert answer(store, cid) == ("The refunder says: No refund: a person refused this call: no."
                                  " The tool did not run.")


def test_a_process_that_lacks_the_function_fails_the_turn_naming_it(store, clock, code):
    registry, agents = code
    runtime = Runtime(store=store, registry=registry, pubsub=Recorder(), config=Config(),
                      clock=clock, sleep=lambda s: None,
                      rules=Rules(providers=ModelAccess(Policy.default(), functions=FunctionModels()).provider_for))
    catalog = Catalog.published(store, lambda name, tenant: True, agents, now=clock())
    commands = Commands(store, registry, clock=clock, catalog=catalog)
    cid = ask(commands, runtime, "refunder")
    (error,) = [e for e in store.log.list_events(cid) if e.type == "error"]
    assert error.content["code"] == "model_not_offered"
    assert "no model function 'refunds'" in error.content["message"]


def test_a_model_function_is_named_and_two_of_one_name_are_refused():
    assert agentq.agent("a", model=flaky).function.name == "flaky"
    assert FunctionModel(lambda r: "x", name="quick").name == "quick"
    with pytest.raises(ValueError, match="give one with name="):
        agentq.agent("b", model=lambda r: "x")
    with pytest.raises(ValueError, match="two model functions are named 'flaky'"):
        CodeAgents([agentq.agent("a", model=flaky),
                    agentq.agent("b", model=FunctionModel(odd, name="flaky"))])
    with pytest.raises(ValueError, match="give no profile and no script"):
        agentq.agent("c", model=flaky, profile="openai")


def test_a_summary_is_written_for_the_function_models_conversation_not_by_its_function(
    store, runtime, commands
):
    cid = commands.create_conversation(ALICE, {}, agent="chatty").id
    for turn in range(4):
        drain(runtime, commands.post_message(cid, f"question {turn}", ALICE)[1])
    (summary, *_) = store.log.list_summaries(cid)
    assert summary.content["text"] == "1 user message(s), tools used: none; last asked: question 0"
    assert [r.text for r in function_agents.ASKED] == [f"question {n}" for n in range(4)]
    assert answer(store, cid).startswith("About question 3: many words")


def test_a_conversation_of_a_function_model_forks_with_its_model(store, runtime, commands):
    cid = ask(commands, runtime, "flaky", "hello")
    fork = commands.fork(cid, ALICE, at_seq=store.log.list_events(cid)[-1].seq)
    assert (fork.settings.profile, fork.settings.model) == (FUNCTION_PROFILE, "flaky")
