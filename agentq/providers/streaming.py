"""One streamed SDK call, the loop both the openai and anthropic adapters share.

It yields a delta per piece of text, then the assembled response. The moment `cancel` is
set it hangs up (the server sees the connection close) and ends without a response, as
the `Provider` protocol asks; every failure leaves it classified, bounded and free of the key
and the endpoint.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from typing import Any

from agentq.providers.answer import Answer
from agentq.providers.base import Delta, ModelResponse
from agentq.providers.connection import scrubbed
from agentq.providers.hangup import Hangup
from agentq.providers.retry import SdkErrors

# Opens the SDK stream (on the endpoint's pooled client); the stream must have a `close()`.
Opener = Callable[[], Iterable[Any]]
# Reads one SDK event into the answer; returns the text it carried, if any.
Reader = Callable[[Any, Answer], str | None]


def stream_call(
    open_stream: Opener,
    read: Reader,
    answer: Answer,
    *,
    sent: dict[str, Any],
    cancel: threading.Event,
    secrets: tuple[str, ...],
    sdk: SdkErrors,
) -> Iterator[Delta | ModelResponse]:
    """Deltas as `read` finds text, then the response; nothing more once `cancel` is set."""
    if cancel.is_set():
        return
    started = time.monotonic()
    with ExitStack() as stack:
        stack.enter_context(Hangup(cancel))
        try:
            events = open_stream()
            stack.callback(events.close)  # type: ignore[attr-defined]
            index = 0
            for event in events:
                if cancel.is_set():
                    return
                text = read(event, answer)
                if text:
                    yield Delta(index=index, text=text)
                    index += 1
            if cancel.is_set():  # a hung-up stream can end quietly, as if it were complete
                return
            latency_ms = round((time.monotonic() - started) * 1000)
            response = answer.response(sent=sent, latency_ms=latency_ms)
        except sdk.failures as exc:
            if cancel.is_set():  # the failure is our own hang-up
                return
            raise scrubbed(sdk.classify(exc), *secrets) from None
    yield response
