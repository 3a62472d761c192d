"""Tenants' own provider keys, sealed at rest with Fernet (`cryptography`), with key rotation.

The operator gives the encryption keys in AGENTQ_ENCRYPTION_KEYS, newest first: the
newest seals, any of them opens (MultiFernet), and `reseal` moves a sealed key to the
newest, so an old encryption key can be retired. What is sealed names its tenant and
profile, and `open` checks both: a sealed key copied to another tenant's row is refused.
"""
from __future__ import annotations

import json
from collections.abc import Sequence

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from agentq.errors import AgentqError


class KeyBoxError(AgentqError):
    """A sealed key that cannot be opened: unknown encryption key, tampered, or misplaced."""

    code = "sealed_key_unreadable"


def new_encryption_key() -> str:
    """A fresh Fernet key for AGENTQ_ENCRYPTION_KEYS (url-safe base64 of 32 random bytes)."""
    return Fernet.generate_key().decode("ascii")


class KeyBox:
    """Seals and opens tenants' keys; the first encryption key is the newest."""

    def __init__(self, encryption_keys: Sequence[str]) -> None:
        if not encryption_keys:
            raise ValueError("a KeyBox needs at least one encryption key")
        try:
            self._fernet = MultiFernet([Fernet(key.strip()) for key in encryption_keys])
        except ValueError:
            raise ValueError(
                "AGENTQ_ENCRYPTION_KEYS holds a value that is not a Fernet key "
                "(url-safe base64 of 32 bytes; `agentq tenant-keys new-encryption-key` makes one)"
            ) from None

    @classmethod
    def from_setting(cls, value: str | None) -> KeyBox | None:
        """The KeyBox of AGENTQ_ENCRYPTION_KEYS (comma-separated, newest first); None if unset."""
        keys = [key.strip() for key in (value or "").split(",") if key.strip()]
        return cls(keys) if keys else None

    def seal(self, tenant: str, profile: str, secret: str) -> str:
        payload = json.dumps({"tenant": tenant, "profile": profile, "key": secret})
        return self._fernet.encrypt(payload.encode("utf-8")).decode("ascii")

    def open(self, sealed: str, tenant: str, profile: str) -> str:
        """The key sealed for exactly this tenant and profile."""
        try:
            payload = json.loads(self._fernet.decrypt(sealed.encode("ascii")))
        except (InvalidToken, ValueError):
            raise KeyBoxError("a stored tenant key cannot be opened with the configured "
                              "encryption keys") from None
        if payload.get("tenant") != tenant or payload.get("profile") != profile:
            raise KeyBoxError("a stored tenant key belongs to another tenant or profile")
        return payload["key"]

    def reseal(self, sealed: str) -> str:
        """The same key sealed with the newest encryption key."""
        try:
            return self._fernet.rotate(sealed.encode("ascii")).decode("ascii")
        except InvalidToken:
            raise KeyBoxError("a stored tenant key cannot be opened with the configured "
                              "encryption keys") from None
