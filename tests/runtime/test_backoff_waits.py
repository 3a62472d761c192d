"""A model call's backoff ends on the step's time limit and on a cancel, against both emulators.

Before, the wait between attempts slept on an event nobody set: a retry-after longer than
the step's limit held the worker past it, and an interrupt during the wait was not heard.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from agentq.runtime.model_call import Cancelled, ModelCall, RoundInfo, StepTimedOut
from agentq.runtime.timers import Timers
from tests.support.announce import unheard
from tests.support.emulators import Fail
from tests.support.emulators.kit import HELLO, Kit, running

INFO = RoundInfo("conv-1", "turn-1", "round-1", "step-1")


@pytest.fixture(scope="module", params=["openai", "anthropic"])
def kit(request: pytest.FixtureRequest) -> Iterator[Kit]:
    with running(request.param) as emulator:
        yield Kit(request.param, emulator)


def model_call(kit: Kit) -> ModelCall:
    return ModelCall(kit.provider(), unheard(), lambda step_key: None, timers=Timers(),
                     max_attempts=3)


def test_a_retry_after_longer_than_the_time_limit_fails_the_step_at_the_limit(kit: Kit) -> None:
    kit.emulator.clear()
    kit.emulator.then(Fail(429, "slow down", headers={"retry-after": "10"}))
    started = time.monotonic()
    with pytest.raises(StepTimedOut):
        model_call(kit).run(HELLO, kit.ctx(), INFO, threading.Event(), timeout_s=1.0)
    assert time.monotonic() - started < 6.0  # the limit (1 s), not the 10 s asked for
    assert len(kit.emulator.received) == 1  # no attempt after the limit


def test_a_cancel_during_the_backoff_ends_the_wait_and_the_call(kit: Kit) -> None:
    kit.emulator.clear()
    kit.emulator.then(Fail(503, "busy", headers={"retry-after": "15"}))
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        model_call(kit).run(HELLO, kit.ctx(), INFO, cancel, timeout_s=60.0)
    assert time.monotonic() - started < 5.0  # not the 15 s asked for
    assert len(kit.emulator.received) == 1
