"""How an adapter reaches its API: base URL, API key from the environment, timeouts.

The key is read from the environment at call time (settings only name the variable, in
`api_key_ref`), and `scrub` keeps it out of every error message an adapter raises.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

import httpx2

from agentq.core.settings import Settings
from agentq.providers.errors import ProviderError

REDACTED = "[redacted]"
MAX_CONNECT_S = 10.0
# Key-shaped tokens a provider may echo back, whole or masked (`sk-ab***wxyz`).
_KEY_SHAPED = re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_\-*.]{4,}|\bBearer\s+\S+", re.IGNORECASE)


def api_key(settings: Settings, env: Mapping[str, str], default_name: str) -> str:
    """The key from the variable `settings.api_key_ref` names, else from `default_name`."""
    name = settings.api_key_ref or default_name
    key = (env.get(name) or "").strip()
    if not key:
        raise ProviderError(
            f"no API key for provider {settings.provider!r}: the environment variable {name} "
            "is not set",
            code="missing_api_key",
        )
    return key


def base_url(settings: Settings, env: Mapping[str, str], env_name: str, default: str) -> str:
    """`settings.base_url`, else the environment's, else the provider's own endpoint.

    Always explicit, so the SDK never reads the process environment behind our back.
    """
    return settings.base_url or (env.get(env_name) or "").strip() or default


def timeout(settings: Settings) -> httpx2.Timeout:
    """Per attempt: connect within MAX_CONNECT_S, then no gap between bytes above read_timeout_s."""
    read_s = settings.limits.read_timeout_s or settings.limits.llm_timeout_s
    return httpx2.Timeout(read_s, connect=min(MAX_CONNECT_S, read_s))


def scrub(text: str, secret: str | None) -> str:
    """`text` without `secret` and without anything shaped like a key or a bearer token."""
    if secret:
        text = text.replace(secret, REDACTED)
    return _KEY_SHAPED.sub(REDACTED, text)


def scrubbed(error: ProviderError, secret: str | None) -> ProviderError:
    """`error` with its message scrubbed (in place: it is the adapter's own fresh error)."""
    error.message = scrub(error.message, secret)
    error.args = (error.message,)
    return error
