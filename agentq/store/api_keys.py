"""API keys: each belongs to one tenant and is stored only as the sha256 of its secret.

A leaked table gives nobody a usable key, and a secret is shown once, when it is made.
The store's role is `ApiKeys` (`store.keys`), on the store's own engine.
"""
from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Engine, select, update

from agentq.store.dialects import Dialect
from agentq.store.engine import begin_read, begin_write
from agentq.store.schema import api_keys

KEY_PREFIX = "aq_"
ROLE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")


def new_secret() -> str:
    """`aq_` and 43 url-safe characters (256 random bits)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class ApiKeyInfo:
    """A stored key, without its secret."""

    id: str
    tenant: str
    created_at: datetime
    revoked_at: datetime | None
    roles: tuple[str, ...] = ()


@dataclass(frozen=True)
class FoundKey:
    """An unrevoked key as a request presents it: its id (never its secret), tenant and roles."""

    id: str
    tenant: str
    roles: tuple[str, ...] = ()


def insert_key_txn(conn: Connection, *, tenant: str, key_hash: str, now: datetime,
                   roles: tuple[str, ...] = ()) -> str:
    key_id = str(uuid.uuid4())
    conn.execute(api_keys.insert().values(id=key_id, tenant=tenant, key_hash=key_hash,
                                          created_at=now, roles=list(roles) or None))
    return key_id


def find_key_txn(conn: Connection, key_hash: str) -> FoundKey | None:
    c = api_keys.c
    query = select(c.id, c.tenant, c.roles).where(c.key_hash == key_hash, c.revoked_at.is_(None))
    row = conn.execute(query).first()
    return None if row is None else FoundKey(row.id, row.tenant, tuple(row.roles or ()))


def find_tenant_txn(conn: Connection, key_hash: str) -> str | None:
    found = find_key_txn(conn, key_hash)
    return None if found is None else found.tenant


def revoke_key_txn(conn: Connection, key_id: str, *, now: datetime) -> bool:
    """Revoke once: only a key that is not revoked yet."""
    c = api_keys.c
    result = conn.execute(
        update(api_keys).where(c.id == key_id, c.revoked_at.is_(None)).values(revoked_at=now)
    )
    return result.rowcount == 1


def list_keys_txn(conn: Connection, *, tenant: str | None) -> list[ApiKeyInfo]:
    c = api_keys.c
    query = select(c.id, c.tenant, c.created_at, c.revoked_at, c.roles).order_by(c.created_at, c.id)
    if tenant is not None:
        query = query.where(c.tenant == tenant)
    return [ApiKeyInfo(row.id, row.tenant, row.created_at, row.revoked_at, tuple(row.roles or ()))
            for row in conn.execute(query)]


class ApiKeys:
    """The api_keys verbs of `Store`."""

    def __init__(self, engine: Engine, dialect: Dialect) -> None:
        self._engine = engine
        self._dialect = dialect

    def create(self, tenant: str, now: datetime, *, roles: tuple[str, ...] = ()) -> tuple[str, str]:
        """A new key for `tenant` carrying `roles`: (id, secret). The secret is not stored and
        cannot be shown again."""
        if not tenant.strip():
            raise ValueError("an API key acts for a tenant; '' owns the code's agents")
        bad = [role for role in roles if not ROLE_NAME.fullmatch(role)]
        if bad:
            raise ValueError(f"a role is letters, digits, '.', '_', ':' or '-': not {bad[0]!r}")
        secret = new_secret()
        with begin_write(self._engine) as conn:
            key_id = insert_key_txn(conn, tenant=tenant, key_hash=hash_secret(secret), now=now,
                                    roles=tuple(dict.fromkeys(roles)))
        return key_id, secret

    def find_tenant(self, secret: str) -> str | None:
        """The tenant of an unrevoked key with this secret, else None."""
        with begin_read(self._engine) as conn:
            return find_tenant_txn(conn, hash_secret(secret))

    def find(self, secret: str) -> FoundKey | None:
        """The unrevoked key with this secret (its id, tenant and roles), else None."""
        with begin_read(self._engine) as conn:
            return find_key_txn(conn, hash_secret(secret))

    def revoke(self, key_id: str, now: datetime) -> bool:
        """Revoke a key; False if it is unknown or already revoked."""
        with begin_write(self._engine) as conn:
            return revoke_key_txn(conn, key_id, now=now)

    def list_all(self, *, tenant: str | None = None) -> list[ApiKeyInfo]:
        """Keys by creation time, without secrets."""
        with begin_read(self._engine) as conn:
            return list_keys_txn(conn, tenant=tenant)
