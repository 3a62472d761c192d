"""The threat model of agentq with many tenants (inv. 9): a tenant is hostile, the operator trusted.

What a hostile tenant tries, and what must hold:

1. Exfiltration: no setting a tenant can send makes a worker send a secret of the operator's
   (the database URL, the bootstrap API key, the provider keys) or another tenant's own key
   to any address; a listener on a local port, standing for the tenant's host, hears nothing.
2. SSRF: a tenant cannot name an address at all; profiles are the only way to an endpoint,
   and a redirect from one is not followed.
3. Leaks through errors: a provider's error body reaches the tenant scrubbed and bounded;
   a missing key is reported without the name of the variable that should hold it.
4. Ceilings: time limits, rounds, scripted delays and budgets above the operator's
   ceilings are refused with the ceiling's name.
5. Starvation: a tenant whose steps take minutes cannot hold every worker. Past its share
   (`running_steps`) its steps wait holding no worker, so another tenant's turn runs at
   once; a waiting step starts when a slot of its own tenant frees (real worker processes).
6. A hostile client's inputs: an out-of-range Last-Event-ID, a created_at that would jump
   the queue, an Idempotency-Key reused with another body, numbers that are not numbers,
   and a database that restarts under the API.
7. Code: a tenant names no Python function to run. A model function is the operator's, used
   only by the operator's code agents as they define it: not named in a tenant's settings,
   its agents or its overrides of a code agent, nor declared as a profile.
"""
from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from agentq.commands import Commands
from agentq.core.settings import Settings
from agentq.tenancy.policy import Policy, PolicyError, load_policy
from agentq.tenancy.profiles import Profile
from agentq.store import Store, migrate
from agentq.tools import Registry
from agentq.core.scope import Scope
from agentq.worker.tasks import enqueue
from tests.support.api import Api, events_of, parse_frame
from tests.support.emulators import Fail
from tests.support.emulators.openai_api import OpenAIEmulator
from tests.support.hostile import Listener, Redirector, TcpProxy
from tests.support.processes import wait_for

OPERATOR_KEY = "sk-operator-live-7f3a9c1e5b2d4f6a8c0e"
SECRETS = {
    "OPENAI_API_KEY": OPERATOR_KEY,
    "ANTHROPIC_API_KEY": "sk-ant-operator-9d8c7b6a5f4e3d2c1b0a",
    "AGENTQ_DATABASE_URL": "postgresql+psycopg://agentq:db-pass-4e1f@db.internal:5432/agentq",
    "AGENTQ_API_KEY": "ops:bootstrap-secret-c0ffee1234",
    "AGENTQ_ENCRYPTION_KEYS": "encryption-key-material-0a1b2c3d",
}
OTHER_TENANTS_KEY = "sk-globex-own-key-5a5a5a5a5a5a5a5a"


@pytest.fixture(scope="module")
def listener() -> Iterator[Listener]:
    with Listener() as running:
        yield running


@pytest.fixture(scope="module")
def operator_endpoint() -> Iterator[OpenAIEmulator]:
    with OpenAIEmulator(api_key=OPERATOR_KEY) as emulator:
        yield emulator


@pytest.fixture
def hostile(sqlite_url_factory, operator_endpoint) -> Iterator[Api]:
    """The API and a worker with the operator's secrets in its environment; one profile takes
    tenants' own keys, and tenant globex has set one."""
    operator_endpoint.clear()
    policy = Policy(profiles={
        "openai": Profile(name="openai", kind="openai", base_url=operator_endpoint.url + "/v1",
                          extra_body=("*",)),
        "byok": Profile(name="byok", kind="openai", base_url=operator_endpoint.url + "/v1",
                        tenant_keys="optional"),
        "scripted": Profile(name="scripted", kind="scripted", models=("scripted",)),
    })
    store = Store.open(sqlite_url_factory())
    api = Api(store, policy=policy, env=SECRETS)
    globex = api.key("globex")
    assert api.client.put("/v1/profiles/byok/key", json={"api_key": OTHER_TENANTS_KEY},
                          headers=globex).status_code == 204
    yield api
    store.dispose()


def heard_no_secret(api: Api, listener: Listener, texts: list[str]) -> None:
    """Nothing reached the listener, and no answer the tenant got holds a secret."""
    assert listener.received == []
    for text in texts:
        for secret in [*SECRETS.values(), OTHER_TENANTS_KEY]:
            assert secret not in text


def run_a_turn(api: Api, headers: dict[str, str], settings: dict[str, Any]) -> list[str]:
    """Create, talk, let the worker run; every answer the tenant could read, as text."""
    created = api.client.post("/v1/conversations", json={"settings": settings}, headers=headers)
    texts = [created.get_data(as_text=True)]
    if created.status_code != 201:
        assert created.status_code == 422, texts
        return texts
    cid = created.json["id"]
    api.say(cid, "hello", headers)
    api.run()
    for path in ("", "/events", "/context", "/tool-calls"):
        texts.append(api.get(f"/v1/conversations/{cid}{path}", headers).get_data(as_text=True))
    return texts


# ---- 1. exfiltration --------------------------------------------------------------------------


def string_paths(schema: dict, defs: dict, path: tuple = ()) -> Iterator[tuple]:
    """Every place in the settings' JSON schema where a tenant may put a string."""
    if "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    for branch in schema.get("anyOf", []):
        yield from string_paths(branch, defs, path)
    kind = schema.get("type")
    if kind == "string":
        yield path
    elif kind == "array":
        yield from string_paths(schema.get("items", {}), defs, (*path, 0))
    elif kind == "object":
        for name, sub in schema.get("properties", {}).items():
            yield from string_paths(sub, defs, (*path, name))
        if schema.get("additionalProperties") not in (None, False):
            for name in ("base_url", "url", "api_base", "headers"):
                yield (*path, name)


def with_value(path: tuple, value: Any) -> dict:
    """Settings on the operator's openai profile with `value` at `path`."""
    root: dict = {"profile": "openai", "model": "emu-model-1"}
    node: Any = root
    for step, following in zip(path, (*path[1:], None)):
        child: Any = {} if not isinstance(following, int) else [{}]
        if isinstance(step, int):
            node = node[0]
            continue
        node[step] = value if following is None else child
        node = node[step]
    return root


SCHEMA = Settings.model_json_schema()
PATHS = sorted(set(string_paths(SCHEMA, SCHEMA["$defs"])), key=str)


def test_the_settings_offer_tenants_strings_in_these_places_only():
    """A new string field is a new way in: it must be added here knowingly (and is then fuzzed)."""
    assert {".".join(map(str, p)) for p in PATHS} == {
        "profile", "model", "system", "tools.0", "script.0.text", "script.0.tool_calls.0.name",
        "script.0.tool_calls.0.args.base_url", "script.0.tool_calls.0.args.url",
        "script.0.tool_calls.0.args.api_base", "script.0.tool_calls.0.args.headers",
        "script.0.fail.status", "compaction.model", "compaction.prompt",
        "extra_body.base_url", "extra_body.url", "extra_body.api_base", "extra_body.headers",
        # declared provider options: sent to the operator's endpoint as data, never a place
        "reasoning_effort", "tool_choice", "tool_choice.name", "response_format.type",
        "response_format.name", "response_format.schema.base_url", "response_format.schema.url",
        "response_format.schema.api_base", "response_format.schema.headers",
        "reasoning.effort", "reasoning.summary",
        # sub-agents: a name admitted only if it is one of the tenant's agents, and what the
        # model reads of it (its description and input schema, sent as data)
        "agents.0.name", "agents.0.description", "agents.0.input_schema.base_url",
        "agents.0.input_schema.url", "agents.0.input_schema.api_base",
        "agents.0.input_schema.headers",
        # guardrails and instructions: names of the operator's registered functions, each
        # admitted only if a module registers it (422 otherwise), never code or a place
        "input_guardrails.0.name", "output_guardrails.0.name", "tool_input_guardrails.0.name",
        "tool_output_guardrails.0.name", "instructions",
        # guardrails that are agents: a name admitted only if it is one of the tenant's agents
        # (and never for a tool call's guardrails)
        "input_guardrails.0.agent", "output_guardrails.0.agent",
        "tool_input_guardrails.0.agent", "tool_output_guardrails.0.agent",
        # handoffs: a name admitted only if it is one of the tenant's agents, what the model
        # reads of it, and which history it sees (a code filter's name: the operator's only)
        "handoffs.0.name", "handoffs.0.description", "handoffs.0.input_filter",
    }


@pytest.mark.parametrize("path", PATHS, ids=lambda p: ".".join(map(str, p)))
def test_no_string_in_any_setting_sends_a_secret_anywhere(hostile, listener, operator_endpoint, path):
    acme = hostile.key("acme")
    texts: list[str] = []
    for value in (listener.url + "/v1", "http://169.254.169.254/latest/meta-data/", "AGENTQ_DATABASE_URL",
                  "${AGENTQ_API_KEY}", "env:OPENAI_API_KEY", "file:///proc/self/environ"):
        texts += run_a_turn(hostile, acme, with_value(path, value))
    heard_no_secret(hostile, listener, texts)
    # whatever was accepted went to the operator's endpoint, with the operator's key only
    assert {h.get("authorization") for h in operator_endpoint.headers} <= {f"Bearer {OPERATOR_KEY}"}


@pytest.mark.parametrize("name", ["base_url", "api_key_ref", "api_base", "endpoint", "url", "headers",
                                  "default_headers", "proxy", "api_key", "key_env", "kind"])
def test_a_setting_naming_an_endpoint_a_key_or_a_variable_is_refused(hostile, listener, name):
    for value in (listener.url, "AGENTQ_DATABASE_URL", {"Authorization": "Bearer x"}):
        response = hostile.client.post("/v1/conversations", json={"settings": {
            "profile": "openai", "model": "m", name: value}}, headers=hostile.key("acme"))
        assert response.status_code == 422
        assert str(value) not in json.dumps(response.json)
    heard_no_secret(hostile, listener, [])


def test_a_tenants_own_key_is_used_only_for_its_own_calls(hostile, operator_endpoint):
    acme, globex = hostile.key("acme"), hostile.key("globex")
    run_a_turn(hostile, acme, {"profile": "byok", "model": "m"})
    run_a_turn(hostile, globex, {"profile": "byok", "model": "m"})
    keys = [h["authorization"] for h in operator_endpoint.headers]
    assert keys == [f"Bearer {OPERATOR_KEY}", f"Bearer {OTHER_TENANTS_KEY}"]  # acme falls back


# ---- 2. SSRF ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("address", [
    "http://169.254.169.254/latest/meta-data/", "http://localhost:5432/", "http://127.0.0.1:6379/",
    "http://10.0.0.1/v1", "http://192.168.1.1/v1", "http://[::1]:8000/v1", "file:///etc/passwd",
])
def test_no_address_a_tenant_names_is_ever_called(hostile, listener, operator_endpoint, address):
    acme = hostile.key("acme")
    for settings in ({"profile": "openai", "base_url": address}, {"profile": address, "model": "m"}):
        response = hostile.client.post("/v1/conversations", json={"settings": settings}, headers=acme)
        assert response.status_code == 422
    # a model is a name in the body sent to the profile's endpoint, wherever it seems to point
    texts = run_a_turn(hostile, acme, {"profile": "openai", "model": address})
    heard_no_secret(hostile, listener, texts)
    assert all(body["model"] == address for body in operator_endpoint.received if "model:" not in address)


def test_a_redirect_from_the_operators_endpoint_is_not_followed(sqlite_url_factory, listener):
    with Redirector(listener.url) as redirector:
        policy = Policy(profiles={"openai": Profile(name="openai", kind="openai",
                                                    base_url=redirector.url + "/v1")})
        api = Api(Store.open(sqlite_url_factory()), policy=policy, env=SECRETS)
        texts = run_a_turn(api, api.key("acme"), {"model": "m", "profile": "openai"})
    heard_no_secret(api, listener, texts)
    assert "error" in texts[2]  # the call failed, it did not go anywhere else


# ---- 3. leaks through errors ------------------------------------------------------------------------


def test_a_providers_error_body_reaches_the_tenant_scrubbed_and_bounded(hostile, operator_endpoint):
    echo = f"upstream said: Authorization: Bearer {OPERATOR_KEY} at {operator_endpoint.url}/v1 " + "x" * 20_000
    operator_endpoint.then(Fail(400, message=echo))
    acme = hostile.key("acme")
    texts = run_a_turn(hostile, acme, {"profile": "openai", "model": "m"})
    [error] = [e for e in json.loads(texts[2])["events"] if e["type"] == "error"]
    assert len(error["content"]["message"]) <= 600
    assert OPERATOR_KEY not in texts[2] and operator_endpoint.url.split("//")[1] not in texts[2]


def test_a_missing_key_is_reported_without_the_variable_it_should_be_in(sqlite_url_factory, operator_endpoint):
    policy = Policy(profiles={"quiet": Profile(name="quiet", kind="openai", key_env="OPS_KEY_VARIABLE_NAME",
                                               base_url=operator_endpoint.url + "/v1")})
    api = Api(Store.open(sqlite_url_factory()), policy=policy, env={})
    texts = run_a_turn(api, api.key("acme"), {"profile": "quiet", "model": "m"})
    [error] = [e for e in json.loads(texts[2])["events"] if e["type"] == "error"]
    assert error["content"]["code"] == "missing_api_key"
    assert "OPS_KEY_VARIABLE_NAME" not in "".join(texts)


# ---- 4. ceilings ------------------------------------------------------------------------------------


@pytest.mark.parametrize("settings, ceiling", [
    ({"script": [{"text": "slow", "delay_s": 3600}]}, "scripted_delay_s"),
    ({"limits": {"llm_timeout_s": 86_400}}, "llm_timeout_s"),
    ({"limits": {"read_timeout_s": 86_400}}, "llm_timeout_s"),
    ({"limits": {"tool_timeout_s": 86_400}}, "tool_timeout_s"),
    ({"limits": {"max_rounds_per_turn": 1000}}, "max_rounds_per_turn"),
    ({"max_tokens": 1_000_000}, "max_tokens"),
    ({"compaction": {"max_context_tokens": 50_000_000}}, "max_context_tokens"),
])
def test_a_setting_above_the_operators_ceiling_is_422_naming_the_ceiling(hostile, settings, ceiling):
    response = hostile.client.post("/v1/conversations", json={"settings": settings},
                                   headers=hostile.key("acme"))
    assert response.status_code == 422
    error = response.json["error"]
    assert error["code"] == "above_ceiling" and ceiling in error["message"]
    assert error["details"][0]["ceiling"] == ceiling
    assert hostile.store.conversations.list_page(tenant="acme", status=None, state=None, after_id=None,
                                                 limit=10) == []


def test_a_demo_tool_cannot_be_asked_to_sleep_for_ten_minutes(hostile):
    acme = hostile.key("acme")
    script = [{"tool_calls": [{"name": "sleep", "args": {"seconds": 600}}]}, {"text": "done"}]
    texts = run_a_turn(hostile, acme, {"script": script})
    [result] = [e for e in json.loads(texts[2])["events"] if e["type"] == "tool_result"]
    assert result["content"]["status"] == "error" and "less than or equal to 60" in result["content"]["output"]


# ---- 5. starvation ---------------------------------------------------------------------------------

SLOW = [{"text": "slow", "delay_s": 90}]


@pytest.mark.worker
@pytest.mark.postgres
@pytest.mark.redis
def test_a_tenant_with_four_slow_steps_on_four_slots_leaves_room_for_another_tenants_turn(
        tmp_path, pg_store_clean, broker, workers):
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text("[ceilings]\nscripted_delay_s = 120\nrunning_steps = 3\n")
    store = pg_store_clean
    commands = Commands(store, Registry([]), policy=load_policy(str(policy_file)))
    worker = workers("w1", concurrency=4, AGENTQ_POLICY=str(policy_file))
    bulk, small = Scope("bulk", "u1"), Scope("small", "u2")
    slow = [commands.create_conversation(bulk, {"script": SLOW}).id for _ in range(4)]
    for cid in slow:
        enqueue(broker, commands.post_message(cid, "take your time", bulk)[1])

    def bulk_steps() -> dict[str, list[str]]:
        statuses: dict[str, list[str]] = {}
        for cid in slow:
            for step in store.steps.list_of(cid):
                statuses.setdefault(step.status, []).append(cid)
        return statuses

    held = wait_for(lambda: (lambda s: s if len(s.get("running", ())) == 3 and s.get("waiting") else None)(
        bulk_steps()), timeout_s=60, what=f"three slow steps running; worker log:\n{worker.log_text()}")
    # the fourth waits in the ledger, holding no worker: the other tenant's turn takes the slot
    quick = commands.create_conversation(small, {"script": [{"text": "quick"}]}).id
    enqueue(broker, commands.post_message(quick, "now, please", small)[1])
    wait_for(lambda: store.conversations.load(quick).fsm.state == "idle"
             and store.conversations.load(quick).fsm.rounds == 1,
             timeout_s=2.0, what=f"the other tenant's turn; worker log:\n{worker.log_text()}")
    assert bulk_steps() == held  # meanwhile the slow tenant still runs three, one waiting

    # a slot of its own frees (a turn cancelled): the waiting step takes it
    [waiting] = held["waiting"]
    enqueue(broker, commands.cancel(held["running"][0], bulk))
    wait_for(lambda: [s.status for s in store.steps.list_of(waiting)] == ["running"], timeout_s=30,
             what=f"the waiting step to start; worker log:\n{worker.log_text()}")
    assert len(bulk_steps()["running"]) == 3


# ---- 6. a hostile client's inputs ------------------------------------------------------------------


def test_a_last_event_id_past_any_seq_means_after_the_end_never_a_broken_stream(api):
    acme = api.key("acme")
    cid = api.create(acme, script=[{"text": "hi"}])
    api.say(cid, "hello", acme)
    api.run()
    response = api.client.get(f"/v1/conversations/{cid}/stream?until_idle=1",
                                  headers={**acme, "Last-Event-ID": "9999999999"})
    assert response.status_code == 200
    frames = [parse_frame(raw) for raw in response.get_data(as_text=True).strip().split("\n\n")]
    assert events_of(frames) == [] and frames[-1].event == "end"
    assert frames[-1].data == {"state": "idle", "last_seq": 2}


def test_a_client_supplied_created_at_is_recorded_but_turns_start_in_arrival_order(api):
    acme = api.key("acme")
    cid = api.create(acme, script=[{"text": "ok"}], script_repeat=True)
    assert api.say(cid, "first", acme).json["queued"] is False  # the turn runs
    long_ago = "2001-01-01T00:00:00Z"
    for text, created_at in (("second", None), ("third", long_ago)):
        body = {"created_at": created_at} if created_at else {}
        assert api.say(cid, text, acme, **body).json["queued"] is True
    api.run()
    users = [e for e in api.store.log.list_events(cid) if e.type == "user_msg"]
    assert [e.content["text"] for e in users] == ["first", "second", "third"]
    assert users[2].created_at == datetime(2001, 1, 1, tzinfo=timezone.utc)  # recorded as sent


def test_an_idempotency_key_reused_with_another_body_is_422_and_the_same_body_replays(api):
    acme = api.key("acme")
    cid = api.create(acme)
    keyed = {**acme, "Idempotency-Key": "pay-1"}
    first = api.say(cid, "pay Bob 20", keyed)
    assert first.status_code == 202 and api.say(cid, "pay Bob 20", keyed).json == first.json
    for body in ({"content": "pay Bob 2000"}, {"content": "pay Bob 20", "on_busy": "interrupt"},
                 {"content": "pay Bob 20", "created_at": "2026-01-01T00:00:00Z"}):
        refused = api.client.post(f"/v1/conversations/{cid}/messages", json=body, headers=keyed)
        assert refused.status_code == 422 and refused.json["error"]["code"] == "idempotency_key_reused"
    assert [e.content["text"] for e in api.store.log.list_events(cid)] == ["pay Bob 20"]


@pytest.mark.parametrize("at_seq", [False, True, "0", 0.5, None, [0]])
def test_numbers_are_numbers_a_fork_at_false_or_0_in_quotes_is_422(api, at_seq):
    acme = api.key("acme")
    cid = api.create(acme)
    response = api.client.post(f"/v1/conversations/{cid}/fork", json={"at_seq": at_seq}, headers=acme)
    assert response.status_code == 422
    listed = api.get("/v1/conversations", acme).json["conversations"]
    assert [c["id"] for c in listed] == [cid]
    assert api.client.post(f"/v1/conversations/{cid}/fork", json={"at_seq": 0},
                               headers=acme).status_code == 201


@pytest.mark.postgres
def test_while_postgres_is_away_the_api_answers_503_with_retry_after_then_recovers(pg_database_factory):
    real = pg_database_factory()
    migrate(real)
    proxy = TcpProxy(("127.0.0.1", 5432))
    store = Store.open(real.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}"))
    try:
        api = Api(store)
        acme, globex = api.key("acme"), api.key("globex")
        cid = api.create(acme)
        proxy.down()
        started = time.monotonic()
        for _ in range(5):
            for response in (api.get(f"/v1/conversations/{cid}", acme), api.say(cid, "hi", acme),
                             api.client.post("/v1/conversations", json={}, headers=globex)):
                assert response.status_code == 503, response.get_data(as_text=True)
                assert response.json["error"]["code"] == "database_unavailable"
                assert int(response.headers["Retry-After"]) >= 1
        assert time.monotonic() - started < 60
        proxy.up()
        deadline = time.monotonic() + 10
        while api.get(f"/v1/conversations/{cid}", acme).status_code != 200:
            assert time.monotonic() < deadline, "the API did not come back with the database"
            time.sleep(0.1)
        assert api.say(cid, "hi", acme).status_code == 202
    finally:
        proxy.down()
        store.dispose()


# ---- 7. code ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/conversations", {"settings": {"profile": "function", "model": "refunds"}}),
    ("/v1/conversations", {"settings": {"provider": "function", "model": "lead_model"}}),
    ("/v1/agents", {"name": "mine", "settings": {"profile": "function", "model": "refunds"}}),
    ("/v1/conversations", {"agent": "refunder", "settings": {"model": "lead_model"}}),
])
def test_a_tenant_cannot_name_a_model_function(store, path, body):
    api = Api(store, agents=["tests.support.function_agents"])
    acme = api.key("acme")
    response = api.client.post(path, json=body, headers=acme)
    assert response.status_code == 422, response.json
    assert response.json["error"]["code"] == "unknown_profile"
    assert "only the operator's own agents" in response.json["error"]["message"]
    assert api.store.conversations.list_page(tenant="acme", status=None, state=None, after_id=None,
                                             limit=10) == []
    assert api.store.agents.list_latest("acme") == []
    started = api.client.post("/v1/conversations", json={"agent": "refunder"}, headers=acme)
    assert started.status_code == 201  # the operator's agent runs its function
    api.say(started.json["id"], "refund", acme)
    api.run()
    assert api.store.conversations.load(started.json["id"]).fsm.state == "awaiting_input"
    context = api.get(f"/v1/conversations/{started.json['id']}/context", acme).json
    assert (context["profile"], context["kind"], context["model"]) == ("function", "function",
                                                                       "refunds")


def test_a_policy_file_cannot_declare_the_function_profile(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text('[profiles.function]\nkind = "scripted"\n')
    with pytest.raises(PolicyError, match="the profile name 'function' is the code's"):
        load_policy(str(path))
