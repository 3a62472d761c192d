"""How an adapter reaches its API: the call's endpoint and key, timeouts, and clean errors.

The endpoint and key come only from `CallContext.endpoint` (resolved from the operator's
profile by `access.resolve_endpoint`), and `scrubbed` keeps the key and the endpoint's
address out of every error message an adapter raises, which a tenant reads.
"""
from __future__ import annotations

import re
from urllib.parse import urlsplit

import httpx2

from agentq.core.settings import Settings
from agentq.providers.base import CallContext
from agentq.providers.errors import ProviderError

REDACTED = "[redacted]"
MAX_CONNECT_S = 10.0
MAX_MESSAGE_CHARS = 500  # what a tenant reads of a provider's error, at most
# Key-shaped tokens a provider may echo back, whole or masked (`sk-ab***wxyz`).
_KEY_SHAPED = re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_\-*.]{4,}|\bBearer\s+\S+", re.IGNORECASE)


def endpoint_of(ctx: CallContext) -> tuple[str, str]:
    """(base_url, api_key) of this call; an adapter has no other source for either."""
    if ctx.endpoint is None:
        raise ProviderError("the call has no endpoint: providers come from ModelAccess",
                            code="no_endpoint")
    return ctx.endpoint.require()


def private(base_url: str, api_key: str) -> tuple[str, ...]:
    """What no error message may show: the key, the endpoint, and its host."""
    return api_key, base_url.rstrip("/"), urlsplit(base_url).netloc


def timeout(settings: Settings) -> httpx2.Timeout:
    """Per attempt: connect within MAX_CONNECT_S, then no gap between bytes above read_timeout_s."""
    read_s = settings.limits.read_timeout_s or settings.limits.llm_timeout_s
    return httpx2.Timeout(read_s, connect=min(MAX_CONNECT_S, read_s))


def scrub(text: str, *secrets: str | None) -> str:
    """`text` without `secrets`, anything shaped like a key or a bearer token, bounded."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    text = _KEY_SHAPED.sub(REDACTED, text)
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[:MAX_MESSAGE_CHARS] + "…"
    return text


def scrubbed(error: ProviderError, *secrets: str | None) -> ProviderError:
    """`error` with its message scrubbed (in place: it is the adapter's own fresh error)."""
    error.message = scrub(error.message, *secrets)
    error.args = (error.message,)
    return error
