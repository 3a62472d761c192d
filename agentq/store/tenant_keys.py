"""Tenants' own provider keys, as the store holds them: sealed text, one per tenant and profile.

Sealing and opening is `agentq.tenancy.keybox`'s; this module never sees a key in clear.
The store's role is `TenantKeys`, beside `ApiKeys`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Engine, delete, select, update

from agentq.store.dialects import Dialect
from agentq.store.engine import begin_read, begin_write, insert_ignoring
from agentq.store.schema import conversations, tenant_keys


@dataclass(frozen=True)
class SealedKey:
    """A stored tenant key, still sealed."""

    tenant: str
    profile: str
    sealed: str = field(repr=False)


class TenantKeys:
    """The tenant_keys verbs of `Store`."""

    def __init__(self, engine: Engine, dialect: Dialect) -> None:
        self._engine = engine
        self._dialect = dialect

    def put(self, tenant: str, profile: str, sealed: str, *, now: datetime) -> None:
        """Store (or replace) the tenant's sealed key for the profile."""
        c = tenant_keys.c
        with begin_write(self._engine) as conn:
            inserted = conn.execute(insert_ignoring(conn, tenant_keys), {
                "tenant": tenant, "profile": profile, "sealed": sealed,
                "created_at": now, "updated_at": now,
            }).rowcount
            if not inserted:
                conn.execute(update(tenant_keys).where(c.tenant == tenant, c.profile == profile)
                             .values(sealed=sealed, updated_at=now))

    def delete(self, tenant: str, profile: str) -> bool:
        """Forget the tenant's key for the profile; False if there was none."""
        c = tenant_keys.c
        with begin_write(self._engine, one_statement=True) as conn:
            result = conn.execute(delete(tenant_keys).where(c.tenant == tenant, c.profile == profile))
        return result.rowcount == 1

    def list_profiles(self, tenant: str) -> list[str]:
        """The profiles the tenant has set a key for."""
        c = tenant_keys.c
        with begin_read(self._engine, one_snapshot=False) as conn:
            query = select(c.profile).where(c.tenant == tenant).order_by(c.profile)
            return list(conn.execute(query).scalars())

    def load_for_conversation(self, conversation_id: str, profile: str) -> SealedKey | None:
        """The owner of a conversation, with its sealed key for `profile` ("" if none); None
        if the conversation is gone. The tenant comes from the conversation's row, never
        from anything a request said."""
        k, conv = tenant_keys.c, conversations.c
        query = (
            select(conv.tenant, k.sealed)
            .select_from(conversations.outerjoin(
                tenant_keys, (k.tenant == conv.tenant) & (k.profile == profile)))
            .where(conv.id == conversation_id)
        )
        with begin_read(self._engine, one_snapshot=False) as conn:
            row = conn.execute(query).first()
        return None if row is None else SealedKey(row.tenant, profile, row.sealed or "")

    def list_sealed(self) -> list[SealedKey]:
        """Every stored tenant key, sealed (for re-sealing under a new encryption key)."""
        c = tenant_keys.c
        with begin_read(self._engine) as conn:
            rows = conn.execute(select(c.tenant, c.profile, c.sealed).order_by(c.tenant, c.profile))
            return [SealedKey(row.tenant, row.profile, row.sealed) for row in rows]

    def reseal(self, key: SealedKey, resealed: str, *, now: datetime) -> bool:
        """Replace a sealed key with its re-sealed form, unless it changed meanwhile."""
        c = tenant_keys.c
        with begin_write(self._engine, one_statement=True) as conn:
            result = conn.execute(
                update(tenant_keys)
                .where(c.tenant == key.tenant, c.profile == key.profile, c.sealed == key.sealed)
                .values(sealed=resealed, updated_at=now)
            )
        return result.rowcount == 1
