"""API keys carry roles (migration 0017): made with `agentq keys create --role`, listed, and
read back with the key's id when a request presents its secret."""
from __future__ import annotations

import pytest

import agentq.cli.main as cli
from agentq.web.auth import BOOTSTRAP_KEY_ID, KeyRing
from tests.support.clock import T0


def test_a_key_made_with_roles_is_found_with_its_id_and_roles(store):
    key_id, secret = store.keys.create("acme", T0, roles=("finance", "ops", "finance"))
    found = store.keys.find(secret)
    assert (found.id, found.tenant, found.roles) == (key_id, "acme", ("finance", "ops"))
    assert [k.roles for k in store.keys.list_all(tenant="acme")] == [("finance", "ops")]


def test_a_key_made_without_roles_carries_none(store):
    _, secret = store.keys.create("acme", T0)
    assert store.keys.find(secret).roles == ()


def test_a_role_with_odd_characters_is_refused(store):
    with pytest.raises(ValueError, match="a role is"):
        store.keys.create("acme", T0, roles=("fin ance",))
    assert store.keys.list_all(tenant="acme") == []


def test_the_bootstrap_key_is_found_with_no_role(store):
    found = KeyRing(store, "acme:s3cret").key_for("s3cret")
    assert (found.id, found.tenant, found.roles) == (BOOTSTRAP_KEY_ID, "acme", ())


def test_keys_create_gives_a_key_its_roles_and_keys_list_shows_them(store, db_url, monkeypatch,
                                                                     capsys):
    monkeypatch.setenv("AGENTQ_DATABASE_URL", db_url)
    assert cli.main(["keys", "create", "--tenant", "acme", "--role", "finance",
                     "--role", "ops"]) == 0
    printed = capsys.readouterr().out
    assert "with roles finance, ops" in printed
    assert store.keys.find(printed.strip().splitlines()[-1]).roles == ("finance", "ops")
    assert cli.main(["keys", "list", "--tenant", "acme"]) == 0
    assert "roles finance,ops" in capsys.readouterr().out


def test_keys_create_refuses_an_odd_role_and_makes_no_key(store, db_url, monkeypatch, capsys):
    monkeypatch.setenv("AGENTQ_DATABASE_URL", db_url)
    assert cli.main(["keys", "create", "--tenant", "acme", "--role", "no good"]) == 2
    assert "a role is" in capsys.readouterr().err
    assert store.keys.list_all(tenant="acme") == []
