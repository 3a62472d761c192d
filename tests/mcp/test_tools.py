"""MCP servers as tool sources, against a real MCP server (the SDK's own) the tests start."""
from __future__ import annotations

import os
import sys

import pytest

from agentq.commands import Commands
from agentq.core.scope import Scope
from agentq.mcp import tool_servers
from agentq.mcp.source import RETRY_DELAYS_S, McpTools
from agentq.tenancy.policy import McpServer, Policy, PolicyError, load_policy
from agentq.tools import Registry, ToolContext
from agentq.worker.queues import all_queues
from agentq.worker.tasks import enqueue
from tests.support.api import Api
from tests.support.mcp_servers import SERVER
from tests.support.mcp_servers import free_port as _free_port
from tests.support.mcp_servers import policy_text as _policy_text
from tests.support.processes import wait_for

# Most tests here talk to a real MCP server process the module starts.
pytestmark = pytest.mark.slow

ACME = Scope(tenant="acme", user="alice")


def _ctx(call_id: str = "call_1") -> ToolContext:
    return ToolContext(tool_call_id=call_id, conversation_id="conv_1", scope=ACME)


def _registry(policy: Policy, environ: dict[str, str] | None = None) -> Registry:
    environ = {"CRM_TOKEN": "Bearer t0ken"} if environ is None else environ
    sources = [McpTools(name, config, environ=environ) for name, config in policy.mcp.items()]
    return Registry([], sources)


# ---- listing ------------------------------------------------------------------------------


def test_a_whole_server_offers_each_of_its_tools_with_the_servers_input_schema(policy):
    specs = {spec.name: spec for spec in _registry(policy).specs(["mcp:crm"])}
    assert set(specs) >= {"mcp__crm__lookup", "mcp__crm__greet", "mcp__crm__refund"}
    refund = specs["mcp__crm__refund"]
    assert refund.description == "Refund an order; refunds above 100 are refused."
    assert refund.parameters["properties"]["amount"]["type"] == "integer"
    assert sorted(refund.parameters["required"]) == ["amount", "order"]


def test_naming_one_tool_of_a_server_offers_that_tool_only(policy):
    assert [s.name for s in _registry(policy).specs(["mcp:crm/greet"])] == ["mcp__crm__greet"]


def test_a_server_that_is_not_listening_offers_no_tools_and_its_calls_fail_readably():
    down = McpServer(url=f"http://127.0.0.1:{_free_port()}/mcp", timeout_s=5)
    registry = Registry([], [McpTools("crm", down)])
    assert registry.specs(["mcp:crm"]) == []
    outcome = registry.call("mcp__crm__greet", {"name": "x"}, _ctx(), timeout_s=5,
                            allowed=["mcp:crm"])
    assert outcome.status == "error"
    assert "tool server 'crm' did not answer" in outcome.output
    assert "127.0.0.1" not in outcome.output  # the operator's URL is never the tenant's to read


# ---- calls --------------------------------------------------------------------------------


def test_a_call_sends_its_call_id_in_meta_and_returns_the_structured_result(policy):
    outcome = _registry(policy).call("mcp__crm__lookup", {"customer": "Ada"}, _ctx("call_77"),
                                     timeout_s=10, allowed=["mcp:crm"])
    assert outcome.status == "ok"
    assert outcome.output == {"customer": "Ada", "tier": "gold", "seen_call_id": "call_77"}


def test_an_error_result_of_the_server_is_an_error_outcome_with_its_message(policy):
    outcome = _registry(policy).call("mcp__crm__refund", {"order": "o1", "amount": 500}, _ctx(),
                                     timeout_s=10, allowed=["mcp:crm"])
    assert outcome.status == "error"
    assert "above the limit of 100" in str(outcome.output)


def test_a_header_value_named_env_is_read_from_the_operators_environment(policy):
    outcome = _registry(policy, {"CRM_TOKEN": "Bearer s3cret"}).call(
        "mcp__crm__authorization", {}, _ctx(), timeout_s=10, allowed=["mcp:crm"])
    assert outcome.output == "Bearer s3cret"


def test_a_call_without_the_headers_secret_in_the_environment_fails_without_calling(policy):
    outcome = _registry(policy, {}).call("mcp__crm__authorization", {}, _ctx(), timeout_s=10,
                                         allowed=["mcp:crm"])
    assert outcome.status == "error"
    assert "lacks CRM_TOKEN" in outcome.output


def test_a_tool_of_a_server_the_settings_do_not_name_is_refused_before_any_call(policy):
    outcome = _registry(policy).call("mcp__crm__greet", {"name": "x"}, _ctx(), timeout_s=10,
                                     allowed=["mcp:crm/lookup"])
    assert outcome.status == "error"
    assert "unknown tool 'mcp__crm__greet'" in outcome.output


def test_a_stdio_server_started_by_command_answers_a_call():
    config = McpServer(command=(sys.executable, str(SERVER), "stdio"), timeout_s=30)
    registry = Registry([], tool_servers({"local": config}))
    assert "mcp__local__greet" in [s.name for s in registry.specs(["mcp:local"])]
    outcome = registry.call("mcp__local__greet", {"name": "Ada"}, _ctx(), timeout_s=30,
                            allowed=["mcp:local"])
    assert (outcome.status, outcome.output) == ("ok", "Hello, Ada!")


def test_a_stdio_servers_python_is_the_workers_own_interpreter_whatever_is_first_on_path(
        tmp_path, monkeypatch):
    impostor = tmp_path / "python"  # a python without the SDK, first on the worker's PATH
    impostor.write_text(f"#!/bin/sh\necho ran >> {tmp_path / 'impostor.log'}\nexit 1\n")
    impostor.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    config = McpServer(command=("python", str(SERVER), "stdio"), timeout_s=30)
    registry = Registry([], tool_servers({"local": config}))
    outcome = registry.call("mcp__local__greet", {"name": "Ada"}, _ctx(), timeout_s=30,
                            allowed=["mcp:local"])
    assert (outcome.status, outcome.output) == ("ok", "Hello, Ada!")
    assert not (tmp_path / "impostor.log").exists()


@pytest.mark.parametrize("after_eof", ["", "; import time; time.sleep(300)"],
                         ids=["exits-on-eof", "ignores-eof"])
def test_a_stdio_servers_process_is_gone_once_its_call_has_returned(tmp_path, after_eof):
    pids = tmp_path / "pids"
    start = (f"import os, runpy, sys; open({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n'); "
             f"sys.argv = ['mcp_server.py', 'stdio']; runpy.run_path({str(SERVER)!r}, "
             f"run_name='__main__'){after_eof}")
    config = McpServer(command=("python", "-c", start), timeout_s=30)
    registry = Registry([], tool_servers({"local": config}))
    outcome = registry.call("mcp__local__greet", {"name": "Ada"}, _ctx(), timeout_s=30,
                            allowed=["mcp:local"])
    assert outcome.output == "Hello, Ada!"
    (pid,) = [int(line) for line in pids.read_text().split()]
    with pytest.raises(ProcessLookupError):  # it exited (or was ended), and was waited for
        os.kill(pid, 0)


def test_a_stdio_servers_command_runs_in_the_workers_working_directory(monkeypatch):
    monkeypatch.chdir(SERVER.parent)
    config = McpServer(command=("python3", SERVER.name, "stdio"), timeout_s=30)
    registry = Registry([], tool_servers({"local": config}))
    assert "mcp__local__greet" in [s.name for s in registry.specs(["mcp:local"])]


# ---- through the API ----------------------------------------------------------------------


LOOKUP = [
    {"text": "Looking.", "tool_calls": [{"name": "mcp__crm__lookup", "args": {"customer": "Ada"}}]},
    {"text": "Ada is gold."},
]


def test_a_conversation_calls_an_mcp_tool_and_the_model_reads_its_result(store, policy,
                                                                          monkeypatch):
    monkeypatch.setenv("CRM_TOKEN", "Bearer t0ken")
    api = Api(store, policy=policy)
    alice = api.key("acme", "alice")
    created = api.client.post("/v1/conversations", headers=alice,
                              json={"settings": {"tools": ["mcp:crm"], "script": LOOKUP}})
    assert created.status_code == 201, created.get_json()
    cid = created.get_json()["id"]
    assert api.client.post(f"/v1/conversations/{cid}/messages", headers=alice,
                           json={"content": "Ada's tier?"}).status_code in (200, 201, 202)
    api.run()
    events = store.log.list_events(cid)
    assert [e.type for e in events] == ["user_msg", "assistant_msg", "tool_call", "tool_result",
                                        "assistant_msg"]
    call, result = events[2].content, events[3].content
    assert result["status"] == "ok", result
    assert result["output"]["seen_call_id"] == call["tool_call_id"]
    assert events[4].content["text"] == "Ada is gold."


def test_a_tenant_the_server_is_not_open_to_is_refused_with_a_422_and_nothing_is_created(
        store, policy):
    api = Api(store, policy=policy)
    mallory = api.key("evil", "mallory")
    for tools in (["mcp:crm"], ["mcp:crm/lookup"], ["mcp:nowhere"]):
        refused = api.client.post("/v1/conversations", headers=mallory,
                                  json={"settings": {"tools": tools}})
        assert refused.status_code == 422, refused.get_json()
        assert refused.get_json()["error"]["code"] == "unknown_tool_server"
        assert "crm" not in refused.get_json()["error"]["message"].split("yours:")[1]
    listed = api.client.get("/v1/conversations", headers=mallory).get_json()
    assert listed["conversations"] == []


def test_a_malformed_server_reference_is_refused_with_a_422(store, policy):
    api = Api(store, policy=policy)
    refused = api.client.post("/v1/conversations", headers=api.key("acme", "alice"),
                              json={"settings": {"tools": ["mcp:crm/"]}})
    assert refused.status_code == 422


# ---- a real worker ------------------------------------------------------------------------


@pytest.mark.worker
@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.parametrize("pool", ["threads", "gevent"])
def test_a_real_worker_runs_the_mcp_call_as_a_tool_step(pg_store_clean, broker, workers, mcp_url,
                                                         tmp_path, pool):
    path = tmp_path / "worker-policy.toml"
    path.write_text(_policy_text(mcp_url))
    policy = load_policy(str(path))
    commands = Commands(pg_store_clean, Registry.from_modules([]), policy=policy)
    conv = commands.create_conversation(ACME, {"tools": ["mcp:crm/lookup"], "script": LOOKUP})
    worker = workers("w1", pool=pool, AGENTQ_POLICY=str(path), CRM_TOKEN="Bearer s3cret")
    _, follow = commands.post_message(conv.id, "Ada's tier?", ACME)
    enqueue(broker, follow)
    store = pg_store_clean
    wait_for(lambda: store.conversations.load(conv.id).fsm.state == "idle"
             and store.conversations.load(conv.id).fsm.rounds == 2,
             timeout_s=60, what=f"the turn to finish; worker log:\n{worker.log_text()}")
    events = store.log.list_events(conv.id)
    result = next(e for e in events if e.type == "tool_result").content
    call = next(e for e in events if e.type == "tool_call").content
    assert result["status"] == "ok"
    assert result["output"]["seen_call_id"] == call["tool_call_id"]
    tool_steps = [s for s in store.steps.list_of(conv.id) if s.kind == "tool"]
    assert [(s.status, s.attempts, s.ref["tool_call_id"]) for s in tool_steps] == [
        ("succeeded", 1, call["tool_call_id"])]


# ---- the policy and routing ---------------------------------------------------------------


def test_a_server_with_both_a_url_and_a_command_stops_the_policy_at_load(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text('[mcp.crm]\nurl = "http://127.0.0.1:1/mcp"\ncommand = ["python", "s.py"]\n')
    with pytest.raises(PolicyError, match="either a url"):
        load_policy(str(path))


def test_a_server_name_a_model_could_not_call_stops_the_policy_at_load(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text('[mcp."crm.v2"]\nurl = "http://127.0.0.1:1/mcp"\n')
    with pytest.raises(PolicyError, match="MCP server names"):
        load_policy(str(path))


def test_a_servers_calls_go_to_the_queue_it_names_and_workers_without_q_take_it():
    config = McpServer(url="http://127.0.0.1:1/mcp", queue="crm-calls")
    registry = Registry([], [McpTools("crm", config)])
    assert registry.queues.get("mcp__crm__lookup") == "crm-calls"
    assert registry.queues.get("lookup") is None
    assert "crm-calls" in all_queues(registry.queues)


@pytest.mark.worker
@pytest.mark.postgres
@pytest.mark.redis
def test_a_worker_killed_during_an_mcp_call_is_replaced_and_the_call_runs_again_with_its_id(
        pg_store_clean, broker, workers, beat, mcp_url, call_log, tmp_path):
    path = tmp_path / "worker-policy.toml"
    path.write_text(_policy_text(mcp_url))
    commands = Commands(pg_store_clean, Registry.from_modules([]), policy=load_policy(str(path)))
    key = f"k{os.getpid()}-{tmp_path.name}"
    script = [{"tool_calls": [{"name": "mcp__crm__slow", "args": {"key": key, "seconds": 3}}]},
              {"text": "done"}]
    conv = commands.create_conversation(ACME, {"tools": ["mcp:crm/slow"], "script": script})
    env = {"AGENTQ_POLICY": str(path), "CRM_TOKEN": "Bearer s3cret"}
    first = workers("w1", **env)
    _, follow = commands.post_message(conv.id, "go", ACME)
    enqueue(broker, follow)

    def calls() -> list[str]:
        return [line.split()[1] for line in call_log.read_text().splitlines()
                if line.split()[0] == key]

    wait_for(calls, what="the MCP call to start")
    first.kill()
    workers("w2", **env)
    beat(**env)
    store = pg_store_clean
    wait_for(lambda: store.conversations.load(conv.id).fsm.state == "idle"
             and store.conversations.load(conv.id).fsm.rounds == 2,
             timeout_s=90, what="the turn to finish")
    events = store.log.list_events(conv.id)
    (call_id,) = {e.content["tool_call_id"] for e in events if e.type == "tool_call"}
    assert calls() == [call_id, call_id]
    result = next(e for e in events if e.type == "tool_result").content
    assert (result["status"], result["output"]) == ("ok", f"{key} done")
    llm_steps = [s for s in store.steps.list_of(conv.id) if s.kind == "llm"]
    assert len(llm_steps) == 2 and all(s.attempts == 1 for s in llm_steps)


class _CountedListings(McpTools):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.listings = 0

    def _list(self, limit_s):
        self.listings += 1
        return super()._list(limit_s)


def test_a_servers_listing_is_read_once_per_worker_until_it_expires(policy):
    source = _CountedListings("crm", policy.mcp["crm"], environ={"CRM_TOKEN": "t"})
    registry = Registry([], [source])
    first, second = registry.specs(["mcp:crm"]), registry.specs(["mcp:crm/greet"])
    assert source.listings == 1
    assert [s.name for s in second] == ["mcp__crm__greet"] and len(first) > 1


def test_a_server_that_could_not_be_listed_is_not_asked_again_at_once():
    down = McpServer(url=f"http://127.0.0.1:{_free_port()}/mcp", timeout_s=5)
    source = _CountedListings("crm", down)
    registry = Registry([], [source])
    assert registry.specs(["mcp:crm"]) == [] and registry.specs(["mcp:crm"]) == []
    assert source.listings == len(RETRY_DELAYS_S) + 1  # the first read's tries only


def test_a_failure_the_model_reads_names_no_url_or_token_of_the_operator():
    import httpx2

    from agentq.mcp.source import _for_tenant

    request = httpx2.Request("POST", "https://crm.internal/mcp?token=s3cret")
    error = httpx2.HTTPStatusError("Server error for url 'https://crm.internal/mcp?token=s3cret'",
                                   request=request, response=httpx2.Response(502, request=request))
    assert "crm.internal" in str(error)  # what httpx says, and what the model used to read
    assert _for_tenant(error) == "the server answered HTTP 502"
    assert "s3cret" not in _for_tenant(httpx2.ConnectError("to https://crm.internal?token=s3cret"))


class _NeverAnswers(McpTools):
    """A source whose every try fails as a server that does not answer would."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.limits: list[float] = []

    def _call(self, tool, args, call_id, elicitation, limit_s):
        from agentq.mcp.source import _Transient

        self.limits.append(limit_s)
        raise _Transient("no answer")


def test_the_tries_of_a_call_share_the_servers_timeout_instead_of_each_having_it():
    source = _NeverAnswers("crm", McpServer(url="http://127.0.0.1:1/mcp", timeout_s=5))
    outcome = Registry([], [source]).call("mcp__crm__greet", {"name": "x"}, _ctx(), timeout_s=5,
                                          allowed=["mcp:crm"])
    assert outcome.status == "error"
    assert len(source.limits) == len(RETRY_DELAYS_S) + 1
    # each try is given what is left of the 5 s after the tries and pauses before it
    assert source.limits[0] <= 5
    assert source.limits[1] <= 5 - RETRY_DELAYS_S[0]
    assert source.limits[2] <= 5 - RETRY_DELAYS_S[0] - RETRY_DELAYS_S[1]


class _CountedRequests(McpTools):
    """A source that counts the JSON-RPC methods its sessions send."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.methods: list[str] = []

    def _client(self, http):
        client = super()._client(http)
        sent = self.methods

        class Counting(type(client)):  # the SDK's Client, counting what its session sends
            async def __aenter__(self):
                entered = await super().__aenter__()
                send = entered.session.send_request

                async def counted(request, *args, **kwargs):
                    sent.append(request.method)
                    return await send(request, *args, **kwargs)

                entered.session.send_request = counted
                return entered

        client.__class__ = Counting
        return client


def test_a_call_after_the_first_lists_no_tools(policy):
    source = _CountedRequests("crm", policy.mcp["crm"], environ={"CRM_TOKEN": "t"})
    registry = Registry([], [source])
    for n in range(3):
        outcome = registry.call("mcp__crm__lookup", {"customer": "Ada"}, _ctx(f"call_{n}"),
                                timeout_s=10, allowed=["mcp:crm"])
        assert outcome.status == "ok"
    assert source.methods.count("tools/call") == 3
    assert source.methods.count("tools/list") == 1  # the first session's, to check results
