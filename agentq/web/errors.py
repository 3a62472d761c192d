"""Every error the API answers, in one shape: {"error": {"code", "message", "details"}}.

agentq's own errors, request validation, werkzeug's HTTP errors (unknown route, wrong
method, oversize body) and anything unforeseen are all translated here, in one place.
"""
from __future__ import annotations

import logging
from typing import Any

from flask import Flask, Response, current_app, jsonify
from pydantic import ValidationError
from werkzeug.exceptions import HTTPException

from agentq.errors import AgentqError, Conflict, Forbidden, InvalidInput, NotFound, Unavailable

log = logging.getLogger(__name__)

_AGENTQ_STATUS = {NotFound: 404, Conflict: 409, InvalidInput: 422, Unavailable: 503,
                  Forbidden: 403}
RETRY_AFTER_S = 2  # what a 503 asks a client to wait: PostgreSQL restarts in about a second
_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "too_many_requests",
    503: "unavailable",
}

_MESSAGES = {404: "no such route", 405: "this method is not allowed on this route"}


class ApiError(Exception):
    """An answer that is an error: raised by views, rendered by the handler below."""

    def __init__(
        self, status: int, code: str, message: str, details: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.details, self.headers = details, headers or {}


def error_response(
    status: int, code: str, message: str, details: Any = None, headers: dict[str, str] | None = None
) -> Response:
    response = jsonify({"error": {"code": code, "message": message, "details": details}})
    response.status_code = status
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def validation_details(exc: ValidationError) -> list[dict[str, Any]]:
    """pydantic's errors without the input or context: short and always JSON."""
    return [
        {"loc": [str(part) for part in error["loc"]], "msg": error["msg"], "type": error["type"]}
        for error in exc.errors(include_url=False, include_context=False, include_input=False)
    ]


def _on_api_error(exc: ApiError) -> Response:
    return error_response(exc.status, exc.code, exc.message, exc.details, exc.headers)


def _on_agentq_error(exc: AgentqError) -> Response:
    status = next((s for kind, s in _AGENTQ_STATUS.items() if isinstance(exc, kind)), None)
    if status is None:
        return _on_unexpected(exc)
    headers = {"Retry-After": str(RETRY_AFTER_S)} if status == 503 else None
    if status == 503:
        log.warning("answered 503 %s: %s (%s)", exc.code, exc, exc.__cause__)
    return error_response(status, exc.code, str(exc), exc.details, headers)


# Refusals with a code of their own, raised in validation as pydantic errors of that type:
# the answer carries the code and the rule's message instead of "the request is not valid".
CODED_VALIDATION_ERRORS = ("forbidden_setting", "conflicting_settings", "invalid_content",
                           "invalid_range")
NAMED_PROBLEMS = 3  # the problems a validation error's message names; `details` has them all


def _on_validation_error(exc: ValidationError) -> Response:
    details = validation_details(exc)
    coded = next((d for d in details if d["type"] in CODED_VALIDATION_ERRORS), None)
    if coded is not None:
        return error_response(422, coded["type"], coded["msg"], details)
    return error_response(422, "validation_error",
                          f"the request is not valid: {_problems(details)}", details)


def _problems(details: list[dict[str, Any]]) -> str:
    """`content: must be non-blank text …; settings.x: …`: what is wrong, where, in one line."""
    named = [_problem(detail) for detail in details[:NAMED_PROBLEMS]]
    more = len(details) - len(named)
    return "; ".join(named) + (f" (and {more} more in details)" if more > 0 else "")


def _problem(detail: dict[str, Any]) -> str:
    where = ".".join(detail["loc"])
    what = detail["msg"].removeprefix("Value error, ")  # pydantic's prefix for a validator's own
    return f"{where}: {what}" if where else what


def _on_http_error(exc: HTTPException) -> Response:
    status = exc.code or 500
    if status >= 500:
        return _on_unexpected(exc)
    headers = {k: v for k, v in exc.get_headers() if k.lower() != "content-type"}
    code = _HTTP_CODES.get(status, "http_error")
    message = _MESSAGES.get(status) or exc.description or exc.name
    limit = current_app.config.get("MAX_CONTENT_LENGTH") if status == 413 else None
    if limit:
        message = f"the body is larger than this API's limit of {limit:,} bytes"
    details = {"max_bytes": limit} if limit else None
    return error_response(status, code, message, details, headers)


def _on_unexpected(exc: Exception) -> Response:
    log.exception("unhandled error in a request", exc_info=exc)
    return error_response(500, "internal_error", "the server failed to answer this request")


def register_error_handlers(app: Flask) -> None:
    app.register_error_handler(ApiError, _on_api_error)
    app.register_error_handler(AgentqError, _on_agentq_error)
    app.register_error_handler(ValidationError, _on_validation_error)
    app.register_error_handler(HTTPException, _on_http_error)
    app.register_error_handler(Exception, _on_unexpected)
