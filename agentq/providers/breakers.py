"""Circuit breakers per provider endpoint, shared by every process: where they are kept, and use.

The transitions are pure (`core.breaker`); here they are applied by compare-and-set on a
board every worker shares: Redis when the deployment has one, else the database (and the
database stands in whenever Redis fails). A board that fails altogether lets calls
through: a broken breaker must not stop the calls it guards. Only failures of the
endpoint itself count (connection, timeout, 5xx, overloaded); a 429 belongs to one key or
organisation, so it is retried, not held against everyone.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, Protocol, TypeVar

import redis
from redis.typing import EncodableT, FieldT

from agentq.config import EMBEDDED_PUBSUB
from agentq.core.breaker import (
    Breaker,
    BreakerPolicy,
    Wait,
    after_failure,
    after_success,
    before_call,
)
from agentq.core.request import Request
from agentq.core.timefmt import format_ts, parse_ts
from agentq.providers.base import CallContext, Delta, ModelResponse, Provider
from agentq.providers.errors import CircuitOpen, ProviderError
from agentq.providers.retry import PROVIDER_FAILURES, classify

log = logging.getLogger(__name__)

SWAP_TRIES = 5
T = TypeVar("T")
_RATE_LIMIT_CODES = frozenset({"rate_limit_error", "rate_limit_exceeded"})


class Board(Protocol):
    """Where breakers are kept; `swap` writes `new` only if the stored one is still `old`."""

    def load_breaker(self, endpoint: str) -> Breaker | None: ...
    def swap_breaker(self, old: Breaker, new: Breaker, *, now: datetime) -> Breaker | None: ...
    def list_breakers(self) -> list[Breaker]: ...


class RedisBoard:
    """Breakers as Redis hashes; a swap is a WATCH/MULTI transaction on the version."""

    INDEX = "agentq:breakers"

    def __init__(self, client: redis.Redis) -> None:
        self._client = client

    @staticmethod
    def key(endpoint: str) -> str:
        return f"agentq:breaker:{endpoint}"

    def load_breaker(self, endpoint: str) -> Breaker | None:
        return _from_hash(endpoint, self._client.hgetall(self.key(endpoint)))

    def swap_breaker(self, old: Breaker, new: Breaker, *, now: datetime) -> Breaker | None:
        key = self.key(new.endpoint)
        stored = _to_hash(new, version=old.version + 1, now=now)
        with self._client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(key)
                if int(pipe.hget(key, "version") or 0) != old.version:
                    return None
                pipe.multi()
                pipe.hset(key, mapping=stored)
                pipe.sadd(self.INDEX, new.endpoint)
                pipe.execute()
            except redis.WatchError:
                return None
        return _from_hash(new.endpoint, stored)

    def list_breakers(self) -> list[Breaker]:
        endpoints = sorted(e.decode() if isinstance(e, bytes) else e
                           for e in self._client.smembers(self.INDEX))
        pipe = self._client.pipeline(transaction=False)
        for endpoint in endpoints:
            pipe.hgetall(self.key(endpoint))
        found = [_from_hash(e, stored) for e, stored in zip(endpoints, pipe.execute(), strict=True)]
        return [breaker for breaker in found if breaker is not None]


def _to_hash(breaker: Breaker, *, version: int, now: datetime) -> dict[FieldT, EncodableT]:
    return {"state": breaker.state, "failures": breaker.failures, "trips": breaker.trips,
            "until": format_ts(breaker.until) if breaker.until else "",
            "last_error": breaker.last_error or "", "version": version,
            "updated_at": format_ts(now)}


def _from_hash(endpoint: str, stored: dict) -> Breaker | None:
    if not stored:
        return None
    text = {_text(name): _text(value) for name, value in stored.items()}
    return Breaker(
        endpoint, state=text["state"], failures=int(text["failures"]),  # type: ignore[arg-type]
        trips=int(text["trips"]), until=parse_ts(text["until"]) if text["until"] else None,
        last_error=text["last_error"] or None, version=int(text["version"]),
    )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def board_for(pubsub_url: str, client: redis.Redis, database: Board) -> Board:
    """Redis (falling back to the database) when the deployment has one, else the database."""
    if pubsub_url.startswith(EMBEDDED_PUBSUB):  # in-process: not shared with other processes
        return database
    return FallbackBoard(RedisBoard(client), database)


class FallbackBoard:
    """Redis first; the database whenever Redis fails (it is shared too, only slower).

    After a failure Redis is left alone for `rest_s`, so a Redis outage does not cost every
    model call a connection timeout.
    """

    def __init__(self, primary: Board, fallback: Board, *, rest_s: float = 30.0) -> None:
        self._primary, self._fallback = primary, fallback
        self._rest_s = rest_s
        self._resting_until = 0.0

    def _either(self, use: Callable[[Board], T]) -> T:
        """`use` of the primary board, or of the fallback when Redis failed (or rests)."""
        if time.monotonic() >= self._resting_until:
            try:
                return use(self._primary)
            except redis.RedisError as exc:
                self._resting_until = time.monotonic() + self._rest_s
                log.warning("circuit breakers use the database for %.0f s: Redis failed (%s)",
                            self._rest_s, exc)
        return use(self._fallback)

    def load_breaker(self, endpoint: str) -> Breaker | None:
        return self._either(lambda board: board.load_breaker(endpoint))

    def swap_breaker(self, old: Breaker, new: Breaker, *, now: datetime) -> Breaker | None:
        return self._either(lambda board: board.swap_breaker(old, new, now=now))

    def list_breakers(self) -> list[Breaker]:
        return self._either(lambda board: board.list_breakers())


def counts_against_endpoint(error: ProviderError) -> bool:
    """A transient failure of the endpoint itself, not a rate limit of one key."""
    return error.transient and error.status != 429 and error.code not in _RATE_LIMIT_CODES


class CircuitBreakers:
    """Says whether a call to an endpoint may go, and records how calls went, on a shared board."""

    def __init__(self, board: Board, policy: BreakerPolicy, clock: Callable[[], datetime]) -> None:
        self.board = board
        self.policy = policy
        self._clock = clock

    def before_call(self, endpoint: str | None) -> Wait | None:
        """None: call now (maybe as the probe); else the Wait that says until when, and why."""
        if endpoint is None:
            return None
        decision = self._change(endpoint, lambda b, now: before_call(b, now, self.policy))
        return decision if isinstance(decision, Wait) else None

    def record(self, endpoint: str, error: ProviderError | None) -> None:
        """A call to `endpoint` got an answer (error None, or a permanent error), or failed."""
        if error is None or not counts_against_endpoint(error):
            self._change(endpoint, lambda b, now: (None, after_success(b)))
        else:
            self._change(endpoint, lambda b, now: (None, after_failure(b, now, error.message[:500],
                                                                       self.policy)))

    def record_server(self, endpoint: str, failure: str | None) -> None:
        """A call to a tool server got an answer (`failure` None: a result, even an error
        result), or none at all (`failure` says why)."""
        if failure is None:
            self._change(endpoint, lambda b, now: (None, after_success(b)))
        else:
            self._change(endpoint, lambda b, now: (None, after_failure(b, now, failure[:500],
                                                                       self.policy)))

    def list(self) -> list[Breaker]:
        return self.board.list_breakers()

    def _change(self, endpoint: str, step: Callable[[Breaker, datetime], tuple[Any, Breaker | None]]):
        """Apply `step` by compare-and-set; on contention or a failing board, let calls go."""
        try:
            for _ in range(SWAP_TRIES):
                now = self._clock()
                current = self.board.load_breaker(endpoint) or Breaker(endpoint)
                result, new = step(current, now)
                if new is None or new == current:
                    return result
                if self.board.swap_breaker(current, new, now=now) is not None:
                    if new.state != current.state:
                        log.warning("circuit breaker for %s is now %s", endpoint, new.state)
                    return result
        except Exception:  # noqa: BLE001 (a broken breaker must not stop the calls it guards)
            log.warning("circuit breaker for %s could not be read or written", endpoint,
                        exc_info=True)
        return None

    def guard(self, provider: Provider, endpoint: str | None) -> Provider:
        """`provider` with each attempt after the first let through by the breaker, and every
        outcome recorded.

        The breaker lets the first attempt of a step through before the step is claimed.
        """
        return provider if endpoint is None else _Guarded(provider, self, endpoint)


class _Guarded:
    def __init__(self, inner: Provider, breakers: CircuitBreakers, endpoint: str) -> None:
        self._inner, self._breakers, self._endpoint = inner, breakers, endpoint
        self._cleared = True  # the first attempt was let through already

    def stream(self, request: Request, ctx: CallContext,
               cancel: threading.Event) -> Iterator[Delta | ModelResponse]:
        if not self._cleared and (wait := self._breakers.before_call(self._endpoint)) is not None:
            raise CircuitOpen(wait.reason, until=wait.until, endpoint=self._endpoint)
        self._cleared = False
        answered = False
        try:
            for item in self._inner.stream(request, ctx, cancel):
                if not answered:  # the endpoint answers: that is all a breaker asks
                    answered = True
                    self._breakers.record(self._endpoint, None)
                yield item
        except PROVIDER_FAILURES as exc:
            error = classify(exc)
            if counts_against_endpoint(error) or (not answered and error.status is not None):
                self._breakers.record(self._endpoint, error)  # a failure, or an answer (4xx)
            raise

