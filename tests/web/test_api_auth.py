"""Keys and tenants: every /v1 route needs a key, and a tenant sees only its own conversations."""
from __future__ import annotations

import pytest
from sqlalchemy import select

import agentq.cli.main as cli
from agentq.config import Config
from agentq.store.schema import api_keys
from tests.support.api import APPROVAL
from agentq.web.app import create_app
from agentq.web.auth import KeyRing, parse_bootstrap
from agentq.web.services import build_services


def _secured_operations(api) -> list[tuple[str, str]]:
    spec = api.client.get("/openapi.json").json
    return [(method, path) for path, ops in spec["paths"].items() for method, op in ops.items()
            if op["security"]]


def _call(api, method, path, headers, cid="c1", call_id="call_x"):
    url = path.format(conversation_id=cid, call_id=call_id, profile="openai", name="support",
                      version="1", webhook_id="w1", turn_id="turn_x", schedule_id="s1")
    bodies = {"resolution": {"status": "resolved"}, "fork": {"at_seq": 0},
              "handoff": {"to": "support"}}
    body = bodies.get(url.rsplit("/", 1)[-1], {"content": "hi"})
    return api.client.open(url, method=method.upper(), headers=headers,
                           json=body if method == "post" else None)


@pytest.mark.parametrize("headers", [
    {}, {"Authorization": "Basic YWxpY2U6cHc="}, {"Authorization": "Bearer"},
    {"Authorization": "Bearer aq_not_a_key"},
])
def test_every_secured_route_answers_401_without_a_valid_key(api, headers):
    operations = _secured_operations(api)
    assert len(operations) == 43 and ("get", "/v1/tool-calls") in operations
    assert ("post", "/v1/agents/{name}/versions") in operations
    assert ("post", "/v1/webhooks/{webhook_id}/rotate") in operations
    assert ("get", "/v1/usage") in operations and ("get", "/v1/usage/overview") in operations
    assert ("put", "/v1/profiles/{profile}/key") in operations
    for method, path in operations:
        response = _call(api, method, path, headers)
        assert response.status_code == 401, (method, path)
        assert response.json["error"]["code"] == "unauthorized"
        assert response.headers["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/openapi.json"])
def test_health_readiness_and_the_spec_need_no_key(api, path):
    assert api.client.get(path).status_code == 200


def test_a_revoked_key_is_refused(api):
    key_id, secret = api.store.keys.create("acme", api.clock())
    headers = {"Authorization": f"Bearer {secret}"}
    assert api.get("/v1/conversations", headers).status_code == 200
    assert api.store.keys.revoke(key_id, api.clock()) is True
    assert api.get("/v1/conversations", headers).status_code == 401
    assert api.store.keys.revoke(key_id, api.clock()) is False


def test_a_revoked_key_stops_working_once_its_cache_entry_expires(api):
    now = [100.0]
    api.services.keys = KeyRing(api.store, None, cache_s=5.0, clock=lambda: now[0])
    key_id, secret = api.store.keys.create("acme", api.clock())
    headers = {"Authorization": f"Bearer {secret}"}
    assert api.get("/v1/conversations", headers).status_code == 200
    api.store.keys.revoke(key_id, api.clock())
    assert api.get("/v1/conversations", headers).status_code == 200  # cached for 5 s
    now[0] += 5.1
    assert api.get("/v1/conversations", headers).status_code == 401


def test_keys_are_stored_only_as_a_hash(api):
    _, secret = api.store.keys.create("acme", api.clock())
    assert secret.startswith("aq_") and len(secret) > 40
    with api.store.engine.connect() as conn:
        stored = [tuple(row) for row in conn.execute(select(api_keys))]
    assert stored and not any(secret in str(value) for row in stored for value in row)


def test_the_bootstrap_key_speaks_for_its_tenant(api):
    api.services.keys = KeyRing(api.store, "ops:s3cret-bootstrap")
    headers = {"Authorization": "Bearer s3cret-bootstrap"}
    cid = api.create(headers)
    assert api.store.conversations.load(cid).tenant == "ops"
    assert api.get("/v1/conversations", {"Authorization": "Bearer s3cret"}).status_code == 401


@pytest.mark.parametrize("value", ["no-colon", ":secret", "tenant:"])
def test_a_malformed_bootstrap_key_is_refused_at_start(value):
    with pytest.raises(ValueError):
        parse_bootstrap(value)


def test_a_user_header_with_control_characters_is_422(api, alice):
    response = api.get("/v1/conversations", {**alice, "X-Agentq-User": "a\x01b"})
    assert response.status_code == 422


def _owned_by_alice(api, alice):
    cid = api.create(alice, script=APPROVAL)
    api.say(cid, "pay Bob", alice)
    api.run()
    [call] = api.store.calls.list_of(cid, status="pending")
    return cid, call.id


def test_another_tenant_can_neither_read_nor_write_nor_stream_nor_resolve(api, alice, mallory):
    cid, call_id = _owned_by_alice(api, alice)
    before = api.types(cid)
    for method, path in _secured_operations(api):
        if "{conversation_id}" not in path:
            continue
        response = _call(api, method, path, mallory, cid=cid, call_id=call_id)
        assert response.status_code == 404, (method, path, response.json)
        assert response.json["error"]["code"] == "not_found"
    assert api.types(cid) == before
    assert api.store.calls.load(cid, call_id).status == "pending"
    assert api.store.conversations.load(cid).status == "active"
    assert api.get(f"/v1/conversations/{cid}", alice).status_code == 200


def test_a_tenant_lists_only_its_own_conversations(api, alice, mallory):
    mine = api.create(alice)
    theirs = api.create(mallory)
    for headers, expected in ((alice, [mine]), (mallory, [theirs])):
        listed = api.get("/v1/conversations", headers).json["conversations"]
        assert [c["id"] for c in listed] == expected


def test_keys_create_prints_a_key_that_authenticates(store, db_url, monkeypatch, capsys):
    monkeypatch.setenv("AGENTQ_DATABASE_URL", db_url)
    assert cli.main(["keys", "create", "--tenant", "acme"]) == 0
    secret = capsys.readouterr().out.strip().splitlines()[-1]
    assert store.keys.find_tenant(secret) == "acme"
    assert cli.main(["keys", "list", "--tenant", "acme"]) == 0
    assert "acme" in capsys.readouterr().out and secret not in capsys.readouterr().out


def test_readiness_is_503_when_the_broker_is_unreachable(sqlite_url_factory):
    config = Config(database_url=sqlite_url_factory(), broker_url="redis://127.0.0.1:1/0")
    services = build_services(config)
    try:
        response = create_app(services=services).test_client().get("/readyz")
    finally:
        services.close()
    assert response.status_code == 503
    assert response.json["status"] == "not_ready"
    assert response.json["checks"]["database"] == "ok"
    assert response.json["checks"]["broker"].startswith("failed")


def test_readiness_is_503_when_the_database_has_no_schema(sqlite_url_factory):
    services = build_services(Config(database_url=sqlite_url_factory(migrated=False)))
    try:
        response = create_app(services=services).test_client().get("/readyz")
    finally:
        services.close()
    assert response.status_code == 503
    assert response.json["checks"]["database"].startswith("failed")
    assert response.json["checks"]["broker"] == "ok"


@pytest.mark.parametrize("tenant", ["", "  "])
def test_no_key_is_made_for_an_empty_tenant_which_owns_the_code_agents(api, tenant):
    with pytest.raises(ValueError, match="acts for a tenant"):
        api.store.keys.create(tenant, api.clock())
    assert all(key.tenant.strip() for key in api.store.keys.list_all())  # nothing was stored
