"""Who is calling: `Authorization: Bearer <key>` names a tenant, `X-Agentq-User` a user.

Keys are looked up by the sha256 of the secret (the store keeps nothing else), plus one
optional bootstrap key from AGENTQ_API_KEY (`tenant:secret`). The user header is trusted
as the tenant's word: a key speaks for its whole tenant, and the header says on whose
behalf, so tools that need a user scope get one. A key's roles (none for the bootstrap key)
say which calls it may decide (agentq.core.deciders).
"""
from __future__ import annotations

import hmac
import time
from collections.abc import Callable

from flask import g, request
from pydantic import TypeAdapter, ValidationError

from agentq.api.common import Token
from agentq.core.deciders import Decider
from agentq.core.scope import Scope
from agentq.store import Store
from agentq.store.api_keys import FoundKey, hash_secret
from agentq.web.errors import ApiError, validation_details

USER_HEADER = "X-Agentq-User"
CACHE_SIZE = 10_000
BOOTSTRAP_KEY_ID = "bootstrap"  # the id decisions made with AGENTQ_API_KEY's key record
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="agentq"'}
_token = TypeAdapter(Token)


def parse_bootstrap(value: str | None) -> tuple[str, str] | None:
    """`tenant:secret` → (tenant, secret); None when unset. Raises ValueError when malformed."""
    if not value:
        return None
    tenant, sep, secret = value.partition(":")
    if not sep or not tenant or not secret:
        raise ValueError("AGENTQ_API_KEY must look like tenant:secret")
    return tenant, secret


class KeyRing:
    """Stored keys plus the optional bootstrap key; a found key is trusted for `cache_s`.

    The cache saves a database round trip on every request; the price is that a revoked
    key keeps working for up to `cache_s` seconds in each API process.
    """

    def __init__(
        self, store: Store, bootstrap: str | None = None, *, cache_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.bootstrap = parse_bootstrap(bootstrap)
        self.cache_s, self.clock = cache_s, clock
        self._cache: dict[str, tuple[FoundKey, float]] = {}

    def tenant_for(self, secret: str) -> str | None:
        found = self.key_for(secret)
        return None if found is None else found.tenant

    def key_for(self, secret: str) -> FoundKey | None:
        """The key with this secret: its id, tenant and roles (the bootstrap key has none)."""
        if self.bootstrap is not None:
            tenant, expected = self.bootstrap
            if hmac.compare_digest(secret.encode("utf-8", "replace"), expected.encode("utf-8", "replace")):
                return FoundKey(BOOTSTRAP_KEY_ID, tenant)
        digest = hash_secret(secret)
        cached = self._cache.get(digest)
        if cached is not None and cached[1] > self.clock():
            return cached[0]
        found = self.store.keys.find(secret)
        if found is not None and self.cache_s > 0:
            if len(self._cache) >= CACHE_SIZE:
                self._cache.clear()
            self._cache[digest] = (found, self.clock() + self.cache_s)
        return found


def authenticate(keys: KeyRing) -> Scope:
    """The scope of this request, or 401."""
    scheme, _, secret = request.headers.get("Authorization", "").partition(" ")
    secret = secret.strip()
    if scheme.lower() != "bearer" or not secret or len(secret) > 512:
        raise ApiError(401, "unauthorized", "send Authorization: Bearer <api key>", headers=_CHALLENGE)
    found = keys.key_for(secret)
    if found is None:
        raise ApiError(401, "unauthorized", "unknown or revoked api key", headers=_CHALLENGE)
    g.key = found
    return Scope(tenant=found.tenant, user=_user())


def decider() -> Decider:
    """Who makes this request's decision: its acting user and the key it came with."""
    found: FoundKey | None = g.get("key")
    scope: Scope = g.scope
    if found is None:
        return Decider(user=scope.user)
    return Decider(user=scope.user, key_id=found.id, roles=found.roles)


def _user() -> str | None:
    raw = request.headers.get(USER_HEADER)
    if raw is None:
        return None
    try:
        return _token.validate_python(raw)
    except ValidationError as exc:
        details = [dict(d, loc=["header", USER_HEADER]) for d in validation_details(exc)]
        raise ApiError(422, "validation_error", f"{USER_HEADER} is not valid", details) from None
