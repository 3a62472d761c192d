"""What the `openai` SDK's exceptions mean, and the exception it raises for an HTTP status.

The openai adapters classify their SDK's failures here (no module outside an adapter
imports an SDK); the scripted provider fails with `sdk_error`, so a scripted failure takes
exactly the path a real one does.
"""
from __future__ import annotations

from typing import Literal

import httpx2
import openai

from agentq.providers.retry import SdkErrors, sdk_classifier

classify = sdk_classifier(timeout=openai.APITimeoutError, connection=openai.APIConnectionError,
                          status=openai.APIStatusError, api=openai.APIError)
OPENAI_ERRORS = SdkErrors(openai.OpenAIError, classify)

_SCRIPTED_URL = "https://scripted.invalid/v1/chat/completions"
# What the OpenAI API answers for each status, and the SDK class it raises for it.
_SDK_ERRORS: dict[int, tuple[type[openai.APIStatusError], str, str | None]] = {
    400: (openai.BadRequestError, "invalid_request_error", None),
    401: (openai.AuthenticationError, "invalid_request_error", "invalid_api_key"),
    403: (openai.PermissionDeniedError, "invalid_request_error", None),
    404: (openai.NotFoundError, "invalid_request_error", "model_not_found"),
    409: (openai.ConflictError, "invalid_request_error", None),
    422: (openai.UnprocessableEntityError, "invalid_request_error", None),
    429: (openai.RateLimitError, "requests", "rate_limit_exceeded"),
}


def sdk_error(status: int | Literal["timeout"]) -> openai.APIError:
    """The exception the real openai SDK raises for this HTTP status (or a timeout)."""
    request = httpx2.Request("POST", _SCRIPTED_URL)
    if status == "timeout":
        return openai.APITimeoutError(request=request)
    default = (openai.InternalServerError, "server_error", None) if status >= 500 else (
        openai.APIStatusError, "invalid_request_error", None)
    cls, kind, code = _SDK_ERRORS.get(status, default)
    message = f"scripted failure with HTTP {status}"
    error = {"message": message, "type": kind, "param": None, "code": code}
    headers = {"retry-after-ms": "10"} if status == 429 else {}
    response = httpx2.Response(status, request=request, headers=headers, json={"error": error})
    # As the SDK does: the exception carries the inner `error` object as its body.
    return cls(f"Error code: {status} - {message}", response=response, body=error)
