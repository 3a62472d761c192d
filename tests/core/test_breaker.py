"""Circuit breaker transitions: closed, open after failures in a row, one probe, closed again."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from agentq.core.breaker import (
    Breaker, BreakerPolicy, Go, Wait, before_call, after_failure, after_success,
)

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)
POLICY = BreakerPolicy(failures_to_open=3, open_s=30.0, max_open_s=100.0, probe_s=60.0)
E = "https://api.example.test/v1"


def later(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def failed(breaker: Breaker, times: int, at: datetime = T0) -> Breaker:
    for _ in range(times):
        breaker = after_failure(breaker, at, "HTTP 503", POLICY) or breaker
    return breaker


def test_a_closed_breaker_lets_every_call_through_and_counts_failures_in_a_row():
    breaker = failed(Breaker(E), 2)
    assert before_call(breaker, T0, POLICY) == (Go(), None)
    assert (breaker.state, breaker.failures, breaker.last_error) == ("closed", 2, "HTTP 503")
    assert after_success(breaker) == Breaker(E, last_error="HTTP 503")  # an answer breaks the run
    assert after_success(Breaker(E)) is None  # nothing to write


def test_it_opens_at_the_threshold_and_calls_wait_until_the_open_time_is_over():
    breaker = failed(Breaker(E), 3)
    assert (breaker.state, breaker.trips, breaker.until) == ("open", 1, later(30))
    decision, changed = before_call(breaker, later(10), POLICY)
    assert isinstance(decision, Wait) and decision.until == later(30) and changed is None
    assert E in decision.reason and "3 failed calls in a row" in decision.reason
    assert after_failure(breaker, later(5), "late failure", POLICY) is None  # no news


def test_after_the_open_time_one_probe_goes_and_the_others_wait():
    breaker = failed(Breaker(E), 3)
    decision, probing = before_call(breaker, later(31), POLICY)
    assert decision == Go(probe=True)
    assert probing.state == "half_open" and probing.until == later(91)
    other, unchanged = before_call(probing, later(32), POLICY)
    assert isinstance(other, Wait) and other.until == later(62) and unchanged is None
    assert "probe" in other.reason


def test_a_probe_that_gets_an_answer_closes_it():
    _, probing = before_call(failed(Breaker(E), 3), later(31), POLICY)
    assert after_success(probing) == Breaker(E, last_error="HTTP 503")


def test_a_failed_probe_opens_it_again_for_twice_as_long_up_to_the_cap():
    _, probing = before_call(failed(Breaker(E), 3), later(31), POLICY)
    again = after_failure(probing, later(35), "HTTP 503", POLICY)
    assert (again.state, again.trips, again.until) == ("open", 2, later(35 + 60))
    for _ in range(5):
        at = again.until
        _, probing = before_call(again, at, POLICY)
        again = after_failure(probing, at, "HTTP 503", POLICY)
    assert again.trips == 7 and again.until - at == timedelta(seconds=100)


def test_a_probe_that_never_reports_back_lets_another_probe_go_when_its_turn_lapses():
    _, probing = before_call(failed(Breaker(E), 3), later(31), POLICY)
    decision, again = before_call(probing, later(92), POLICY)
    assert decision == Go(probe=True) and again.until == later(152)
