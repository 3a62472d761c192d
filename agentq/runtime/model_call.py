"""One model call of a step: stream deltas, retry transient errors, honour the time limit.

Every delta carries the round id of *this* step (inv. 6), never a conversation-wide
"current round" (docs/design.md §16.5).
"""
from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from agentq.core.breaker import Wait
from agentq.core.request import Request
from agentq.core.settings import Settings
from agentq.providers.base import CallContext, Delta, ModelResponse, Provider
from agentq.providers.breakers import CircuitBreakers
from agentq.providers.errors import ProviderError
from agentq.providers.retry import retrying
from agentq.runtime.deltas import CoalescedDeltas
from agentq.runtime.seams import Announcer, RoundAnnouncer, TenantRules
from agentq.runtime.timers import Timers

log = logging.getLogger(__name__)


class StepTimedOut(Exception):
    """The model call passed the step's time limit; its stream was closed."""


class Cancelled(Exception):
    """The stream was closed on purpose (interrupt or lost lease) before it finished."""

    def __init__(self, partial_text: str) -> None:
        super().__init__(partial_text)
        self.partial_text = partial_text


@dataclass(frozen=True)
class RoundInfo:
    """Who is streaming: stamped on every delta and retry notice of the round."""

    conversation_id: str
    turn_id: str | None
    round_id: str | None  # None: a summary's call, which is no round of the conversation
    step_key: str


class ModelCall:
    """Streams one response, announcing its round's deltas and retries as they happen."""

    def __init__(
        self,
        provider: Provider,
        announcer: Announcer,
        count_retry: Callable[[str], object],
        *,
        timers: Timers,
        max_attempts: int = 5,
        sleep: Callable[[float], None] | None = None,
        delta_window_s: float = 0.0,
    ) -> None:
        """`count_retry(step_key)` counts a retry of the step (`Steps.add_retry`);
        `delta_window_s`: how long deltas are held to be published together (0: each delta
        at once; `runtime.deltas`)."""
        self._provider = provider
        self._announcer = announcer
        self._count_retry = count_retry
        self._timers = timers
        self._max_attempts = max_attempts
        self._sleep = sleep
        self._delta_window_s = delta_window_s

    def run(
        self,
        request: Request,
        ctx: CallContext,
        info: RoundInfo,
        cancel: threading.Event,
        *,
        timeout_s: float,
    ) -> ModelResponse:
        """The final response; raises ProviderError, StepTimedOut or Cancelled.

        A backoff between attempts waits on `cancel`, which the time limit sets too: an
        interrupt or the limit ends the wait at once, however long a retry-after asked for.
        """
        timed_out = threading.Event()

        def on_timeout() -> None:
            timed_out.set()
            cancel.set()  # closes the stream for real, not just stops waiting

        timer = self._timers.call_later(timeout_s, on_timeout)
        tries = iter(range(ctx.attempt, ctx.attempt + self._max_attempts))
        announced = self._announcer.round(info.conversation_id, turn_id=info.turn_id,
                                          round_id=info.round_id)

        def attempt() -> ModelResponse:
            _stop_if_cancelled(cancel, timed_out, ctx)
            return self._stream_once(request, ctx, announced, cancel, next(tries), timed_out)

        try:
            return retrying(
                attempt,
                max_attempts=self._max_attempts,
                on_retry=lambda attempt, err, delay: self._on_retry(
                    info, announced, attempt, err, delay),
                sleep=self._sleep or (lambda delay_s: _wait(cancel, delay_s)),
            )
        finally:
            timer.cancel()

    def _stream_once(
        self,
        request: Request,
        ctx: CallContext,
        announced: RoundAnnouncer,
        cancel: threading.Event,
        attempt: int,
        timed_out: threading.Event,
    ) -> ModelResponse:
        parts: list[str] = []
        final: ModelResponse | None = None
        this_try = dataclasses.replace(ctx, attempt=attempt)
        deltas = CoalescedDeltas(announced, attempt, self._timers, window_s=self._delta_window_s)
        try:
            for item in self._provider.stream(request, this_try, cancel):
                if isinstance(item, Delta):
                    parts.append(item.text)
                    deltas.add(item.text)
                else:
                    final = item
            if final is not None:
                deltas.flush()  # every delta is out before the answer is committed
        finally:
            deltas.close()  # an attempt that failed or was cancelled publishes no more
        if final is None:
            _stop_if_cancelled(cancel, timed_out, ctx, "".join(parts))
            raise Cancelled("".join(parts))
        return final

    def _on_retry(self, info: RoundInfo, announced: RoundAnnouncer, attempt: int,
                  err: ProviderError, delay_s: float) -> None:
        log.warning("model call attempt %d failed, retrying in %.1f s: %s", attempt, delay_s, err)
        self._count_retry(info.step_key)
        announced.retry(attempt, str(err), round(delay_s, 3), transient=err.transient)


@dataclass(frozen=True)
class ModelCalls:
    """How this worker makes model calls: the rules that pick each call's provider and
    endpoint, where deltas and retries are announced, its timers, and the circuit breakers
    of the endpoints the calls go to."""

    rules: TenantRules
    announcer: Announcer
    count_retry: Callable[[str], object]  # step key (`Steps.add_retry`)
    timers: Timers
    max_attempts: int
    sleep: Callable[[float], None] | None = None  # between retries (None: really sleep)
    delta_window_s: float = 0.0  # AGENTQ_DELTA_WINDOW_S: deltas published together
    breakers: CircuitBreakers | None = None  # kept by `rules.endpoint_url` (None: no breaker)

    def breaker_wait(self, settings: Settings) -> Wait | None:
        """None if a step may call its endpoint now (maybe as the breaker's probe), else when."""
        if self.breakers is None:
            return None
        return self.breakers.before_call(self.rules.endpoint_url(settings))

    def start(self, settings: Settings, info: RoundInfo, *, deltas: bool = True) -> ModelCall:
        """A call for one step, its first attempt let through by the breaker already; without
        `deltas`, only its retries are published.

        Each attempt after the first asks the breaker again, and every outcome is recorded.
        """
        provider = self.rules.provider_for(settings)
        if self.breakers is not None:
            provider = self.breakers.guard(provider, self.rules.endpoint_url(settings))
        sleep = {} if self.sleep is None else {"sleep": self.sleep}
        return ModelCall(
            provider, self.announcer if deltas else RetriesOnly(self.announcer),
            self.count_retry, timers=self.timers, max_attempts=self.max_attempts,
            delta_window_s=self.delta_window_s, **sleep,
        )


class RetriesOnly:
    """An announcer that passes on a round's retries and drops its deltas (a summary's call,
    whose text is no answer a stream shows)."""

    def __init__(self, announcer: Announcer) -> None:
        self._announcer = announcer

    def round(self, conversation_id: str, *, turn_id: str | None, round_id: str | None
              ) -> RoundAnnouncer:
        return _RetriesOf(self._announcer.round(conversation_id, turn_id=turn_id,
                                                round_id=round_id))

    def new_events(self, conversation_id: str, last_seq: int | None) -> object:
        return self._announcer.new_events(conversation_id, last_seq)


class _RetriesOf:
    def __init__(self, announced: RoundAnnouncer) -> None:
        self._announced = announced

    def delta(self, attempt: int, index: int, text: str) -> object:
        return None

    def retry(self, attempt: int | None, error: str, next_delay_s: float, *, transient: bool,
              until: str | None = None, **why: object) -> object:
        return self._announced.retry(attempt, error, next_delay_s, transient=transient,
                                     until=until, **why)


def _stop_if_cancelled(
    cancel: threading.Event, timed_out: threading.Event, ctx: CallContext, partial_text: str = ""
) -> None:
    """Raise StepTimedOut past the time limit, Cancelled after an interrupt; else nothing."""
    if timed_out.is_set():
        raise StepTimedOut(
            f"the model call passed its time limit of {ctx.settings.limits.llm_timeout_s}s"
        )
    if cancel.is_set():
        raise Cancelled(partial_text)


def _wait(cancel: threading.Event, delay_s: float) -> None:
    """Sleep between attempts, woken early by a cancel."""
    cancel.wait(delay_s)
