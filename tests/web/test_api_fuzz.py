"""Schemathesis' coverage and fuzzing phases on every operation of the app (tests/support/fuzz.py):
no input gets a 5xx or an answer the spec does not declare, what the schema refuses the API
refuses, and what it allows the API accepts, or refuses with a documented code of its own."""
from __future__ import annotations

import logging

import pytest
import schemathesis

from agentq.tenancy.keybox import new_encryption_key
from agentq.tenancy.policy import Policy
from agentq.tenancy.profiles import Profile
from tests.support.api import APPROVAL, Api
from tests.support.dev import WAIT_S, Dev
from tests.support.fuzz import OPERATIONS, configured, fuzz
from tests.support.processes import wait_for

pytestmark = pytest.mark.slow  # thousands of generated requests

# The built-in profiles, and one that takes a tenant's own key (PUT /v1/profiles/byok/key).
POLICY = Policy(profiles={**Policy.default().profiles, "byok": Profile(
    name="byok", kind="openai", base_url="https://llm.example/v1", tenant_keys="optional")})


@pytest.fixture
def served(pg_store_clean):
    """The app on PostgreSQL, a key, and what its paths can name: a conversation waiting for
    a person (its stream ends with ?until_idle=1) and its pending call, an agent, a webhook,
    a profile that takes the tenant's own key. agentq dev's fuzz below runs on SQLite."""
    store = pg_store_clean
    target = Api(store, policy=POLICY, key_cache_s=60.0)  # as served: a found key is cached
    headers = target.key("fuzz")
    cid = target.create(headers, script=APPROVAL)
    target.say(cid, "pay Bob", headers)
    target.run()
    [call] = store.calls.list_of(cid, status="pending")
    assert target.client.post("/v1/agents", json={"name": "fuzzy"}, headers=headers).status_code == 201
    hook = target.client.post("/v1/webhooks", headers=headers, json={
        "url": "https://hooks.example.com/agentq", "event_types": ["call.waiting"]}).json
    schedule = target.client.post("/v1/schedules", headers=headers, json={
        "name": "fuzzy", "agent": "fuzzy", "every_s": 3600, "message": "hello"}).json
    real = {"conversation_id": cid, "call_id": call.id, "profile": "byok", "name": "fuzzy",
            "version": "1", "webhook_id": hook["id"], "schedule_id": schedule["id"],
            "turn_id": store.log.list_events(cid)[0].turn_id}
    config = configured(headers=headers, fixed={"query.until_idle": "1"})
    return schemathesis.openapi.from_wsgi("/openapi.json", target.app, config=config), real


@pytest.mark.postgres
@pytest.mark.parametrize("operation", sorted(OPERATIONS), ids=" ".join)
def test_no_input_gets_a_5xx_an_undeclared_answer_or_a_refusal_its_schema_does_not_state(
        served, operation, caplog):
    schema, real = served
    with caplog.at_level(logging.INFO):
        outcome = fuzz(schema, operation, real)
    assert outcome.cases["coverage"] and outcome.cases["fuzzing"]
    assert not outcome.failures, "\n\n".join(outcome.failures)
    # a tenant's bad input is answered, never logged as a failure an operator would chase
    alarms = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not alarms, [r.getMessage() for r in alarms]


# What reaches more than the app in agentq dev: webhook URLs its sender resolves in gevent's
# resolver thread, then messages its embedded worker runs turns on, whose events those
# webhooks are sent.
LIVE = [("post", "/v1/webhooks"), ("patch", "/v1/webhooks/{webhook_id}"),
        ("post", "/v1/conversations/{conversation_id}/messages")]


@pytest.fixture
def dev(tmp_path):
    process = Dev(tmp_path, AGENTQ_ENCRYPTION_KEYS=new_encryption_key(), AGENTQ_WEBHOOK_POLL_S="0.2",
                  # every URL the API takes is stored and sent to: http too, and no cap
                  AGENTQ_WEBHOOK_ALLOW_HTTP="on", AGENTQ_WEBHOOK_MAX_ENDPOINTS="100000")
    yield process
    process.stop()


def test_agentq_dev_answers_fuzzed_input_on_spec_and_its_log_holds_no_traceback(dev):
    dev.wait_banner()
    with dev.client() as api:
        real = {"conversation_id": api.post("/v1/conversations", json={}).json()["id"],
                "webhook_id": api.post("/v1/webhooks", json={
                    "url": "https://hooks.example.com/agentq", "event_types": ["turn.completed"]}).json()["id"]}
        failures = []
        for operation in LIVE:
            config = configured(headers={"Authorization": f"Bearer {dev.key()}"})
            schema = schemathesis.openapi.from_url(f"{dev.url()}/openapi.json", config=config)
            failures += fuzz(schema, operation, real).failures
        _a_decided_turn(api)  # call.waiting, call.resolved, turn.completed: for every endpoint
        wait_for(lambda: _all_attempted(api), timeout_s=WAIT_S, what="every delivery's first attempt")
    assert not failures, "\n\n".join(failures)
    assert "Traceback" not in dev.text(), dev.text()


def _a_decided_turn(api) -> None:
    """A turn whose call waits for a person, who answers it, and which then ends."""
    cid = api.post("/v1/conversations", json={"settings": {"script": APPROVAL}}).json()["id"]
    api.post(f"/v1/conversations/{cid}/messages", json={"content": "pay Bob"})
    [call] = wait_for(lambda: api.get(f"/v1/conversations/{cid}").json()["pending"],
                      timeout_s=WAIT_S, what="the call to wait for a person")
    api.post(f"/v1/conversations/{cid}/tool-calls/{call['tool_call_id']}/resolution",
             json={"status": "resolved", "result": "paid"})
    wait_for(lambda: api.get(f"/v1/conversations/{cid}").json()["state"] == "idle",
             timeout_s=WAIT_S, what="the turn to end")


def _all_attempted(api) -> bool:
    """Every delivery of every endpoint has been tried at least once."""
    hooks = api.get("/v1/webhooks").json()["webhooks"]
    return all(delivery["attempts"] for hook in hooks
               for delivery in api.get(f"/v1/webhooks/{hook['id']}/deliveries").json()["deliveries"])
