"""The SDK's errors: one class per kind of answer a program handles differently.

Every error the API answers has the shape `{"error": {"code", "message", "details"}}`;
`ApiError` carries those three and the HTTP status, and its subclass says which kind it
is, so a program catches `NotFound` or `Conflict` and reads `.code` for the precise cause
(`idempotency_key_reused`, `too_many_streams`, …).
"""
from __future__ import annotations

from typing import Any

from agentq.errors import AgentqError


class ClientError(AgentqError):
    """Root of the SDK's errors: a request that did not get the answer it asked for."""

    code = "client_error"


class Unreachable(ClientError):
    """No HTTP answer at all: the server is down, the URL is wrong, or it timed out."""

    code = "unreachable"


class StreamBroken(ClientError):
    """A turn's stream kept failing and reconnecting made no progress."""

    code = "stream_broken"


class ApiError(ClientError):
    """The API answered with an error."""

    def __init__(self, status: int, code: str, message: str, details: Any = None,
                 retry_after_s: float | None = None) -> None:
        super().__init__(message, code=code, details=details)
        self.status, self.message, self.retry_after_s = status, message, retry_after_s

    def __str__(self) -> str:
        return f"{self.message} ({self.code}, HTTP {self.status})"

    def __reduce__(self):
        return type(self), (self.status, self.code, self.message, self.details, self.retry_after_s)


class InvalidRequest(ApiError):
    """400, 413, 415, 422: the request itself is wrong; sending it again changes nothing."""


class Unauthorized(ApiError):
    """401: no key, or an unknown or revoked one."""


class Forbidden(ApiError):
    """403: the key may not do this."""


class NotFound(ApiError):
    """404: no such conversation, call, turn or route for this tenant."""


class Conflict(ApiError):
    """409: the conversation's state does not allow it now (ended, not failed, busy…)."""


class RateLimited(ApiError):
    """429: too many requests or open streams; `retry_after_s` says when to try again."""


class Unavailable(ApiError):
    """503: a service the API needs is down for now; `retry_after_s` says when to try again."""


class ServerError(ApiError):
    """Any other 5xx: the server failed."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: InvalidRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
    413: InvalidRequest, 415: InvalidRequest, 422: InvalidRequest, 429: RateLimited,
    503: Unavailable,
}


def error_for(status: int, body: Any, retry_after_s: float | None, reason: str = "") -> ApiError:
    """The error an answer with this status and body stands for."""
    kind = _BY_STATUS.get(status) or (ServerError if status >= 500 else ApiError)
    try:
        error = body["error"]
        return kind(status, str(error["code"]), str(error["message"]), error.get("details"),
                    retry_after_s)
    except (TypeError, KeyError):
        return kind(status, "http_error", reason or f"HTTP {status}", None, retry_after_s)
