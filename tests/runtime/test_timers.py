"""Timers on one thread (runtime/timers.py) and tool calls on reusable daemon threads (threads.py)."""
from __future__ import annotations

import contextvars
import os
import threading
import time

import pytest

from agentq.process import threads as threads_module
from agentq.runtime import timers as timers_module
from agentq.runtime.timers import Timers
from agentq.process.threads import DaemonThreads
from tests.support.processes import wait_for

REQUEST = contextvars.ContextVar("request", default=None)


@pytest.fixture
def short_idle(monkeypatch):
    monkeypatch.setattr(timers_module, "IDLE_S", 0.2)
    monkeypatch.setattr(threads_module, "IDLE_S", 0.2)


def test_timers_fire_in_order_of_due_time_off_the_callers_thread():
    timers, fired, done = Timers(), [], threading.Event()
    timers.call_later(0.06, lambda: (fired.append(("late", threading.get_ident())), done.set()))
    timers.call_later(0.02, lambda: fired.append(("early", threading.get_ident())))
    assert done.wait(5)
    assert [name for name, _ in fired] == ["early", "late"]
    assert threading.get_ident() not in {ident for _, ident in fired}


def test_a_sooner_timer_does_not_wait_for_a_later_one():
    timers, soon, started = Timers(), threading.Event(), threading.Event()
    timers.call_later(0.0, started.set)
    assert started.wait(5)  # the timer thread runs
    later = timers.call_later(30, soon.set)
    time.sleep(0.1)  # and now sleeps until the later one is due
    timers.call_later(0.01, soon.set)
    try:
        assert soon.wait(5)
    finally:
        later.cancel()


def test_a_callback_stuck_on_io_delays_no_other_timer():
    timers, release, other = Timers(), threading.Event(), threading.Event()
    timers.call_later(0.0, lambda: release.wait(5))  # a renewal on a dead connection
    timers.call_later(0.05, other.set)
    try:
        assert other.wait(2)
    finally:
        release.set()


def test_a_slow_periodic_call_never_overlaps_itself():
    timers, running, overlaps, calls = Timers(), threading.Lock(), [], []

    def slow() -> None:
        if not running.acquire(blocking=False):
            overlaps.append(time.monotonic())
            return
        calls.append(time.monotonic())
        time.sleep(0.05)  # longer than the period
        running.release()

    timer = timers.call_every(0.01, slow)
    wait_for(lambda: len(calls) >= 3, timeout_s=5, what="three calls")
    timer.cancel()
    assert overlaps == []


def test_a_cancelled_timer_never_fires():
    timers, fired = Timers(), threading.Event()
    timers.call_later(0.05, fired.set).cancel()
    after = threading.Event()
    timers.call_later(0.1, after.set)
    assert after.wait(5)
    assert not fired.is_set()


def test_a_periodic_timer_repeats_until_cancelled():
    timers, beats = Timers(), []
    timer = timers.call_every(0.02, lambda: beats.append(time.monotonic()))
    wait_for(lambda: len(beats) >= 3, timeout_s=5, what="three beats")
    timer.cancel()
    count = len(beats)
    time.sleep(0.1)
    assert len(beats) <= count + 1  # at most the one already running when cancelled


def test_a_failing_callback_does_not_stop_the_others(caplog):
    timers, after = Timers(), threading.Event()
    timers.call_later(0.01, lambda: 1 / 0)
    timers.call_later(0.03, after.set)
    assert after.wait(5)
    # the failing callback ran on another pool thread: its log line may come a moment later
    wait_for(lambda: "timer callback failed" in caplog.text, timeout_s=5, what="the failure logged")


def test_a_callback_runs_in_the_context_of_whoever_set_it():
    timers, seen, done = Timers(), [], threading.Event()
    REQUEST.set("step-1")
    timers.call_later(0.01, lambda: (seen.append(REQUEST.get()), done.set()))
    REQUEST.set(None)
    assert done.wait(5) and seen == ["step-1"]


def test_the_timer_thread_ends_when_idle_and_comes_back_when_needed(short_idle):
    timers, first = Timers("test-idle-timers"), threading.Event()
    timers.call_later(0.0, first.set)
    assert first.wait(5)
    wait_for(lambda: not _threads_named("test-idle-timers"), timeout_s=5, what="the thread to end")
    second = threading.Event()
    timers.call_later(0.0, second.set)
    assert second.wait(5)


def test_sequential_calls_reuse_one_daemon_thread():
    threads = DaemonThreads("test-pool")
    idents = [threads.submit(threading.get_ident).result(timeout=5) for _ in range(5)]
    assert len(set(idents)) == 1
    worker = next(t for t in threading.enumerate() if t.ident == idents[0])
    assert worker.daemon and worker.name.startswith("test-pool-")


def test_an_abandoned_call_does_not_hold_up_the_next():
    threads, release = DaemonThreads("test-pool"), threading.Event()
    stuck = threads.submit(lambda: release.wait(5))
    assert threads.submit(lambda: "next").result(timeout=2) == "next"
    assert not stuck.done()
    release.set()
    assert stuck.result(timeout=5) is True


def test_calls_at_once_each_get_a_thread():
    threads, barrier = DaemonThreads("test-pool"), threading.Barrier(3, timeout=5)
    futures = [threads.submit(lambda: (barrier.wait(), threading.get_ident())[1]) for _ in range(3)]
    assert len({future.result(timeout=5) for future in futures}) == 3


def test_a_call_carries_the_callers_context_and_its_exception():
    threads = DaemonThreads("test-pool")
    REQUEST.set("call-7")
    assert threads.submit(REQUEST.get).result(timeout=5) == "call-7"
    failing = threads.submit(lambda: {}["missing"])
    with pytest.raises(KeyError):
        failing.result(timeout=5)


def test_idle_daemon_threads_end(short_idle):
    threads = DaemonThreads("test-idle-pool")
    barrier = threading.Barrier(2, timeout=5)
    for future in [threads.submit(barrier.wait) for _ in range(2)]:
        future.result(timeout=5)
    assert len(_threads_named("test-idle-pool")) == 2
    wait_for(lambda: not _threads_named("test-idle-pool"), timeout_s=5, what="idle threads to end")
    assert threads.submit(lambda: "again").result(timeout=5) == "again"


def test_a_forked_child_starts_its_own_threads():
    timers, threads = Timers(), DaemonThreads("test-fork-pool")
    started = threading.Event()
    timers.call_later(0.0, started.set)
    assert started.wait(5) and threads.submit(lambda: 1).result(timeout=5) == 1
    pid = os.fork()
    if pid == 0:  # the child: neither parent thread exists here
        ok = threading.Event()
        timers.call_later(0.0, ok.set)
        code = 0 if ok.wait(5) and threads.submit(lambda: 2).result(timeout=5) == 2 else 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def _threads_named(prefix: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]
