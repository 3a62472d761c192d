"""Tenants' own provider keys: sealed with Fernet at rest, write-only over the API, re-sealed
under a new encryption key, and used only for their own tenant's calls on their profile."""
from __future__ import annotations

import logging
from datetime import datetime, timezone

import pytest
from sqlalchemy import select

import agentq.cli.main as cli
from agentq.tenancy.keybox import KeyBox, KeyBoxError, new_encryption_key
from agentq.tenancy.own_keys import OwnKeys
from agentq.config import Config
from agentq.tenancy.policy import Policy, PolicyError
from agentq.tenancy.profiles import Profile
from agentq.store import Store
from agentq.store.schema import tenant_keys
from tests.support.api import Api

TENANT_KEY = "sk-tenant-acme-0123456789abcdefghij"
BYOK = Policy(profiles={
    "byok": Profile(name="byok", kind="openai", base_url="https://llm.example/v1", tenant_keys="optional"),
    "house": Profile(name="house", kind="openai", base_url="https://llm.example/v1"),
    "acme-only": Profile(name="acme-only", kind="openai", tenants=("acme",), tenant_keys="required"),
})


@pytest.fixture
def byok_api(store) -> Api:
    return Api(store, policy=BYOK)


# ---- the key box --------------------------------------------------------------------------------


def test_a_sealed_key_opens_only_for_its_own_tenant_and_profile():
    box = KeyBox([new_encryption_key()])
    sealed = box.seal("acme", "byok", TENANT_KEY)
    assert TENANT_KEY not in sealed and box.open(sealed, "acme", "byok") == TENANT_KEY
    for tenant, profile in (("globex", "byok"), ("acme", "house")):
        with pytest.raises(KeyBoxError):
            box.open(sealed, tenant, profile)


def test_a_new_encryption_key_seals_while_the_old_one_still_opens_until_resealed():
    old, new = new_encryption_key(), new_encryption_key()
    sealed_old = KeyBox([old]).seal("acme", "byok", TENANT_KEY)
    rotated = KeyBox([new, old])
    assert rotated.open(sealed_old, "acme", "byok") == TENANT_KEY
    resealed = rotated.reseal(sealed_old)
    assert KeyBox([new]).open(resealed, "acme", "byok") == TENANT_KEY
    with pytest.raises(KeyBoxError):
        KeyBox([new]).open(sealed_old, "acme", "byok")


def test_a_value_that_is_not_a_fernet_key_is_refused_at_start():
    with pytest.raises(ValueError, match="not a Fernet key"):
        KeyBox.from_setting("not-a-key")
    assert KeyBox.from_setting("") is None


def test_a_profile_that_takes_tenants_keys_needs_encryption_keys(store):
    with pytest.raises(PolicyError, match="AGENTQ_ENCRYPTION_KEYS"):
        OwnKeys.from_config(Config(), store, BYOK, clock=lambda: None)


# ---- the API --------------------------------------------------------------------------------------


def test_a_key_is_write_only_and_stored_sealed(byok_api: Api, store, caplog):
    caplog.set_level(logging.DEBUG)
    acme = byok_api.key("acme", "alice")
    response = byok_api.client.put("/v1/profiles/byok/key", json={"api_key": TENANT_KEY}, headers=acme)
    assert response.status_code == 204 and response.data == b""
    listed = byok_api.get("/v1/profiles", acme).json["profiles"]
    assert {p["name"]: p["own_key_set"] for p in listed} == {"byok": True, "house": False,
                                                             "acme-only": False}
    assert TENANT_KEY not in byok_api.get("/v1/profiles", acme).get_data(as_text=True)
    with store.engine.connect() as conn:
        [sealed] = conn.execute(select(tenant_keys.c.sealed)).scalars().all()
    assert TENANT_KEY not in sealed and TENANT_KEY[-8:] not in sealed
    assert TENANT_KEY not in caplog.text


def test_deleting_a_key_forgets_it_and_deleting_again_is_404(byok_api: Api):
    acme = byok_api.key("acme")
    byok_api.client.put("/v1/profiles/byok/key", json={"api_key": TENANT_KEY}, headers=acme)
    assert byok_api.client.delete("/v1/profiles/byok/key", headers=acme).status_code == 204
    assert byok_api.client.delete("/v1/profiles/byok/key", headers=acme).status_code == 404
    assert not any(p["own_key_set"] for p in byok_api.get("/v1/profiles", acme).json["profiles"])


@pytest.mark.parametrize("profile, tenant, status, code", [
    ("house", "acme", 409, "own_keys_not_taken"),
    ("nope", "acme", 404, "not_found"),
    ("acme-only", "globex", 404, "not_found"),
])
def test_a_key_for_a_profile_that_takes_none_or_that_the_tenant_cannot_see_is_refused(
    byok_api: Api, profile, tenant, status, code
):
    response = byok_api.client.put(f"/v1/profiles/{profile}/key", json={"api_key": TENANT_KEY},
                                   headers=byok_api.key(tenant))
    assert response.status_code == status and response.json["error"]["code"] == code
    assert TENANT_KEY not in response.get_data(as_text=True)


@pytest.mark.parametrize("bad", ["sk-1234", "has space" * 2, "line\r\nX-Injected: 1xxxxxx", 12345678])
def test_a_malformed_key_is_422_and_never_echoed(byok_api: Api, bad):
    response = byok_api.client.put("/v1/profiles/byok/key", json={"api_key": bad},
                                   headers=byok_api.key("acme"))
    assert response.status_code == 422 and str(bad) not in response.get_data(as_text=True)


def test_a_tenant_sees_only_the_profiles_open_to_it(byok_api: Api):
    names = [p["name"] for p in byok_api.get("/v1/profiles", byok_api.key("globex")).json["profiles"]]
    assert names == ["byok", "house"]


# ---- re-sealing -------------------------------------------------------------------------------------


def test_reseal_moves_every_stored_key_to_the_newest_encryption_key(sqlite_url_factory, monkeypatch, tmp_path):
    url = sqlite_url_factory()
    old, new = new_encryption_key(), new_encryption_key()
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text('[profiles.byok]\nkind = "openai"\ntenant_keys = "optional"\n')
    monkeypatch.setenv("AGENTQ_DATABASE_URL", url)
    monkeypatch.setenv("AGENTQ_POLICY", str(policy_file))
    store = Store.open(url)
    try:
        store.tenant_keys.put("acme", "byok", KeyBox([old]).seal("acme", "byok", TENANT_KEY),
                              now=datetime.now(timezone.utc))
        monkeypatch.setenv("AGENTQ_ENCRYPTION_KEYS", f"{new},{old}")
        assert cli.main(["tenant-keys", "reseal"]) == 0
        [stored] = store.tenant_keys.list_sealed()
        assert KeyBox([new]).open(stored.sealed, "acme", "byok") == TENANT_KEY
    finally:
        store.dispose()


def test_a_key_sealed_under_a_retired_encryption_key_fails_the_turn_asking_for_it_again(byok_api: Api, store):
    acme = byok_api.key("acme")
    byok_api.client.put("/v1/profiles/byok/key", json={"api_key": TENANT_KEY}, headers=acme)
    byok_api.own_keys.keybox = KeyBox([new_encryption_key()])  # the old encryption key is gone
    cid = byok_api.create(acme, profile="byok", model="m")
    byok_api.say(cid, "hello", acme)
    byok_api.run()
    [error] = [e.content for e in store.log.list_events(cid) if e.type == "error"]
    assert error["code"] == "own_key_unreadable" and "set it again" in error["message"]
