"""When the SDK sends a request again, and how long it waits first.

A request is sent again only when doing so cannot do its work twice: when the server
surely did nothing (no connection was made; a 429 or 503 with `Retry-After`, which the
API answers before acting, and says when to come back) or when the request is idempotent
(a read, an end, a resolution, a message with its Idempotency-Key) and its answer was
lost or a gateway failed (502, 503, 504). The wait honours `Retry-After`, and grows
exponentially otherwise, with jitter so that many clients do not come back at once.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import httpx2

from agentq.client.errors import ApiError, RateLimited, Unavailable

GATEWAY_FAILURES = (502, 503, 504)
# No connection was made: the request never reached the server.
NOT_SENT = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout)


@dataclass(frozen=True)
class Retries:
    """`attempts` tries in all; waits from `backoff_s`, doubling, at most `max_wait_s`."""

    attempts: int = 4
    backoff_s: float = 0.5
    max_wait_s: float = 30.0

    def wait_s(self, tried: int, error: Exception, *, idempotent: bool) -> float | None:
        """Seconds to wait before try `tried + 1`; None: give up and raise `error`."""
        if tried >= self.attempts:
            return None
        if isinstance(error, (RateLimited, Unavailable)) and error.retry_after_s is not None:
            return min(error.retry_after_s, self.max_wait_s)
        if isinstance(error, ApiError):
            if idempotent and error.status in GATEWAY_FAILURES:
                return self._backoff(tried)
            return None  # the server answered: sending the same again gets the same answer
        if isinstance(error, NOT_SENT) or (idempotent and isinstance(error, httpx2.TransportError)):
            return self._backoff(tried)
        return None

    def _backoff(self, tried: int) -> float:
        wait = min(self.backoff_s * 2 ** (tried - 1), self.max_wait_s)
        return wait * (0.5 + random.random() / 2)


DEFAULT_RETRIES = Retries()
NO_RETRIES = Retries(attempts=1)
