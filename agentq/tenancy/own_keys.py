"""Tenants' own provider keys ("bring your own key"): set, forget, look up for a call, re-seal.

A key is write-only: it is sealed (agentq.tenancy.keybox) before the store sees it, never returned
by any API, never logged, and opened only in a worker, for a call of its own tenant on the
profile it was set for. Which profiles take tenants' keys is the operator's choice
(`tenant_keys` in a profile); without AGENTQ_ENCRYPTION_KEYS no key can be set.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from agentq.config import Config
from agentq.errors import Conflict, NotFound, Unavailable
from agentq.providers.errors import ProviderError
from agentq.store import Store
from agentq.store.tenant_keys import TenantKeys
from agentq.tenancy.access import Owner
from agentq.tenancy.keybox import KeyBox, KeyBoxError
from agentq.tenancy.policy import Policy, PolicyError
from agentq.tenancy.profiles import Profile

log = logging.getLogger(__name__)


def keybox_for(config: Config, policy: Policy) -> KeyBox | None:
    """The KeyBox of AGENTQ_ENCRYPTION_KEYS; a profile that takes tenants' keys needs one."""
    keybox = KeyBox.from_setting(config.encryption_keys)
    taking = [p.name for p in policy.profiles.values() if p.tenant_keys != "never"]
    if taking and keybox is None:
        raise PolicyError(f"profiles {', '.join(taking)} take tenants' own keys, which are "
                          "stored encrypted: set AGENTQ_ENCRYPTION_KEYS "
                          "(`agentq tenant-keys new-encryption-key` makes one)")
    return keybox


class OwnKeys:
    """The own-key verbs, over the store's tenant keys, a policy and a key box."""

    def __init__(self, keys: TenantKeys, policy: Policy, keybox: KeyBox | None,
                 clock: Callable[[], datetime]) -> None:
        self.keys = keys
        self.policy = policy
        self.keybox = keybox
        self.clock = clock

    @classmethod
    def from_config(cls, config: Config, store: Store, policy: Policy,
                    clock: Callable[[], datetime]) -> OwnKeys:
        return cls(store.tenant_keys, policy, keybox_for(config, policy), clock)

    def put(self, tenant: str, profile_name: str, secret: str) -> None:
        """Set (or replace) the tenant's key for a profile that takes tenants' keys."""
        profile = self._taking_keys(tenant, profile_name)
        if self.keybox is None:
            raise Unavailable("this deployment cannot store keys: the operator has not set "
                              "AGENTQ_ENCRYPTION_KEYS", code="own_keys_unavailable")
        sealed = self.keybox.seal(tenant, profile.name, secret)
        self.keys.put(tenant, profile.name, sealed, now=self.clock())
        log.info("tenant %s set its key for profile %s", tenant, profile.name)

    def delete(self, tenant: str, profile_name: str) -> bool:
        """Forget the tenant's key for a profile; False if none was set."""
        if self.policy.profile(profile_name, tenant) is None:
            raise NotFound(f"no profile {profile_name}")
        return self.keys.delete(tenant, profile_name)

    def profiles_with_keys(self, tenant: str) -> set[str]:
        return set(self.keys.list_profiles(tenant))

    def owner(self, conversation_id: str, profile_name: str) -> Owner | None:
        """The conversation's tenant and its key for the profile, opened (a worker's lookup)."""
        found = self.keys.load_for_conversation(conversation_id, profile_name)
        if found is None:
            return None
        if not found.sealed or self.keybox is None:
            return Owner(found.tenant)
        try:
            return Owner(found.tenant, self.keybox.open(found.sealed, found.tenant, profile_name))
        except KeyBoxError as exc:
            log.error("tenant %s, profile %s: %s", found.tenant, profile_name, exc)
            raise ProviderError(f"your key for profile {profile_name!r} cannot be read: set it "
                                "again", code="own_key_unreadable") from None

    def reseal_all(self) -> int:
        """Seal every stored key with the newest encryption key; returns how many moved."""
        if self.keybox is None:
            raise Unavailable("AGENTQ_ENCRYPTION_KEYS is not set", code="own_keys_unavailable")
        moved = 0
        for key in self.keys.list_sealed():
            resealed = self.keybox.reseal(key.sealed)
            moved += self.keys.reseal(key, resealed, now=self.clock())
        return moved

    def _taking_keys(self, tenant: str, profile_name: str) -> Profile:
        profile = self.policy.profile(profile_name, tenant)
        if profile is None:
            raise NotFound(f"no profile {profile_name}")
        if profile.tenant_keys == "never":
            raise Conflict(f"profile {profile_name!r} uses the operator's key; it takes no key "
                           "of yours", code="own_keys_not_taken")
        return profile
