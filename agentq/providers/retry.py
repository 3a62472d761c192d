"""One retry policy for every provider (docs/design.md §9): classify, then back off.

`classify` turns any httpx or stdlib failure into a `ProviderError` whose `transient`
flag is the only thing `retrying` looks at; each SDK adapter classifies its own SDK's
exceptions (`openai_errors`, `anthropic_errors`) with `sdk_classifier` and `from_status`,
so no module but an adapter's imports its SDK. SDK built-in retries stay off so attempts
do not multiply.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import httpx2
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from agentq.providers.errors import ContextTooLong, ProviderError, ProviderTimeout

T = TypeVar("T")
OnRetry = Callable[[int, ProviderError, float], None]

MAX_RETRY_AFTER_S = 300.0
_TRANSIENT_STATUSES = frozenset({408, 409, 429, 529})
# 429s that are quota or spend limits: waiting does not refill them.
_QUOTA_CODES = frozenset({
    "insufficient_quota",
    "enforced_spend_limit_reached",
    "contract_spend_limit_reached",
    "linked_organization_spend_limit_reached",
})
# Error types a provider sends inside a 200 stream when it fails mid-answer (Anthropic's
# `error` event, OpenAI's error chunk): an overloaded or failing server, worth another try.
_TRANSIENT_CODES = frozenset({
    "overloaded_error", "api_error", "rate_limit_error", "server_error", "timeout_error",
    "internal_error", "service_unavailable",
})
_CONTEXT_CODES = frozenset({"context_length_exceeded"})
_CONTEXT_PHRASES = ("prompt is too long", "maximum context length", "context_length_exceeded")

_TIMEOUTS = (httpx2.TimeoutException, TimeoutError)
_CONNECTION = (httpx2.TransportError, ConnectionError)
PROVIDER_FAILURES = (ProviderError, httpx2.HTTPError, *_TIMEOUTS, *_CONNECTION)


def classify(exc: BaseException) -> ProviderError:
    """The ProviderError that an httpx or stdlib failure means: transient or permanent."""
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, _TIMEOUTS):
        return ProviderTimeout(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, _CONNECTION):
        return ProviderError(f"{type(exc).__name__}: {exc}", transient=True, code="connection_error")
    if isinstance(exc, httpx2.HTTPStatusError):
        return from_status(exc.response.status_code, str(exc), _body_of(exc), exc.response.headers)
    return ProviderError(f"{type(exc).__name__}: {exc}", code="unexpected_error")


@dataclass(frozen=True)
class SdkErrors:
    """How one SDK fails: its exception base class, and what each of its exceptions means."""

    base: type[BaseException]
    classify: Callable[[BaseException], ProviderError]

    @property
    def failures(self) -> tuple[type[BaseException], ...]:
        return (*PROVIDER_FAILURES, self.base)


def sdk_classifier(
    *, timeout: type[BaseException], connection: type[BaseException], status: type[BaseException],
    api: type[BaseException],
) -> Callable[[BaseException], ProviderError]:
    """`classify` for an SDK with this exception family (the openai and anthropic SDKs share
    its shape: a timeout, a connection error, a status error with a `response`, and an API
    error whose `body` may be an error event inside a 200 stream)."""

    def classify_sdk(exc: BaseException) -> ProviderError:
        if isinstance(exc, timeout):
            return ProviderTimeout(f"{type(exc).__name__}: {exc}")
        if isinstance(exc, connection):
            return ProviderError(f"{type(exc).__name__}: {exc}", transient=True, code="connection_error")
        if isinstance(exc, status):
            response = exc.response  # type: ignore[attr-defined]
            return from_status(response.status_code, str(exc), getattr(exc, "body", None),
                               response.headers)
        body = getattr(exc, "body", None)
        if isinstance(exc, api) and _error_object(body):
            return from_status(200, str(exc), body, {})  # an error event inside a 200 stream
        return classify(exc)

    return classify_sdk


def from_status(status: int, message: str, body: Any, headers: Mapping[str, str]) -> ProviderError:
    """What an HTTP error answer (or an error event in a 200 stream) means, from its status,
    its error body and its retry-after headers."""
    codes = _error_codes(body)
    text = (message + " " + " ".join(_error_messages(body))).lower()
    if codes & _CONTEXT_CODES or any(phrase in text for phrase in _CONTEXT_PHRASES):
        return ContextTooLong(message, status=status)
    quota = codes & _QUOTA_CODES
    if status < 400:  # the stream had begun (HTTP 200): only the error's type can tell
        transient = bool(codes & _TRANSIENT_CODES) and not quota
    else:
        transient = (status in _TRANSIENT_STATUSES or status >= 500) and not quota
    code = min(quota) if quota else _primary_code(body) or f"http_{status}"
    return ProviderError(
        message, transient=transient, status=status, code=code, retry_after_s=retry_after(headers)
    )


def _error_object(body: Any) -> dict[str, Any]:
    """The `error` object of an error body: OpenAI's SDK passes it bare, Anthropic's wrapped."""
    if isinstance(body, dict):
        inner = body.get("error")
        return inner if isinstance(inner, dict) else body
    return {}


def _error_codes(body: Any) -> set[str]:
    error = _error_object(body)
    details = error.get("details")
    error_code = details.get("error_code") if isinstance(details, dict) else None
    values = [error.get("code"), error.get("type"), error_code]
    return {value for value in values if isinstance(value, str)}


def _primary_code(body: Any) -> str | None:
    error = _error_object(body)
    details = error.get("details")
    error_code = details.get("error_code") if isinstance(details, dict) else None
    for value in (error_code, error.get("code"), error.get("type")):
        if isinstance(value, str) and value:
            return value
    return None


def _error_messages(body: Any) -> list[str]:
    message = _error_object(body).get("message")
    return [message] if isinstance(message, str) else []


def _body_of(exc: BaseException) -> Any:
    """The decoded error body: the SDKs keep it on the exception, httpx only in the response."""
    if not isinstance(exc, httpx2.HTTPStatusError):
        return getattr(exc, "body", None)
    try:
        return exc.response.json()
    except (ValueError, httpx2.StreamError):
        return None


def retry_after(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """Seconds the server asked us to wait: `retry-after-ms`, else `Retry-After` (seconds or HTTP date)."""
    milliseconds = _number(headers.get("retry-after-ms"))
    if milliseconds is not None:
        return milliseconds / 1000.0
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _number(value)
    if seconds is not None:
        return seconds
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _number(value: str | None) -> float | None:
    try:
        number = float(value) if value is not None else None
    except ValueError:
        return None
    return number if number is not None and 0.0 <= number < float("inf") else None


class BackoffWait:
    """Capped exponential backoff with full jitter, but never shorter than the server's retry-after.

    Why custom: tenacity's stock waits ignore `retry-after`. A retry-after above `cap_s`
    still wins, up to MAX_RETRY_AFTER_S.
    """

    def __init__(self, base_s: float, cap_s: float) -> None:
        self.base_s, self.cap_s = base_s, cap_s

    def __call__(self, state: RetryCallState) -> float:
        ceiling = min(self.cap_s, self.base_s * 2 ** (state.attempt_number - 1))
        delay = random.uniform(0.0, ceiling)
        error = state.outcome.exception() if state.outcome else None
        if isinstance(error, ProviderError) and error.retry_after_s is not None:
            delay = max(delay, min(error.retry_after_s, MAX_RETRY_AFTER_S))
        return delay


def retrying(
    fn: Callable[[], T],
    *,
    max_attempts: int = 5,
    base_s: float = 0.5,
    cap_s: float = 30.0,
    on_retry: OnRetry | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call `fn` until it succeeds, retrying only transient errors; raise the classified error.

    `fn` is called once per attempt, so a closure can count attempts. Only provider
    failures are classified; any other exception (a bug, the caller's own control flow)
    passes through at once, unretried and untouched.
    """

    def attempt() -> T:
        try:
            return fn()
        except PROVIDER_FAILURES as exc:
            error = classify(exc)
            raise error from (None if error is exc else exc)

    def before_sleep(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        if on_retry is not None and isinstance(error, ProviderError):  # retried: transient
            on_retry(state.attempt_number, error, state.upcoming_sleep)

    # The first attempt runs before any policy is built: nearly every call succeeds at
    # once, and building and driving tenacity's policy costs a step about 1% of a worker's
    # CPU. A transient failure hands the policy that attempt's error as its own first
    # attempt, so what is retried, slept and reported is the same as with the policy alone.
    try:
        return attempt()
    except ProviderError as error:
        if not error.transient or max_attempts <= 1:
            raise
        first_failure: list[ProviderError] = [error]

    def retried() -> T:
        if first_failure:
            raise first_failure.pop()
        return attempt()

    policy = Retrying(
        retry=retry_if_exception(lambda exc: isinstance(exc, ProviderError) and exc.transient),
        stop=stop_after_attempt(max_attempts),
        wait=BackoffWait(base_s, cap_s),
        sleep=sleep,
        before_sleep=before_sleep,
        reraise=True,
    )
    return policy(retried)
