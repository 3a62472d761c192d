"""A process's room for steps: claims held to what it can move forward, and a step alone."""
from __future__ import annotations

import threading
import time

import pytest

from agentq.runtime.admission import Admission, Gated


def eventually(condition, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def enter_in_thread(admission: Admission, entered: list, *, alone: bool = False,
                    release: threading.Event, redrive: str = "advance",
                    turned_away: list | None = None) -> threading.Thread:
    def run() -> None:
        try:
            with (admission.alone() if alone else admission.among_others(lambda: redrive)) as place:
                entered.append(place)
                release.wait(10)
        except Gated as gated:
            if turned_away is not None:
                turned_away.append((redrive, gated.send_now))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_step_waits_unclaimed_while_as_many_as_the_pool_are_between_claim_and_work():
    admission, entered, go = Admission(limit=100, starting=2), [], threading.Event()
    threads = [enter_in_thread(admission, entered, release=go) for _ in range(3)]
    assert eventually(lambda: len(entered) == 2)
    assert not eventually(lambda: len(entered) == 3, timeout_s=0.2)
    entered[0].started()  # its work began: the third may claim now
    assert eventually(lambda: len(entered) == 3)
    go.set()
    for thread in threads:
        thread.join(5)
    assert admission.in_flight() == 0


def test_a_step_alone_waits_for_the_steps_in_flight_and_turns_newcomers_away_until_it_ends():
    admission, go_first, go_alone = Admission(limit=100, starting=10), threading.Event(), threading.Event()
    first, alone, later, turned_away = [], [], [], []
    threads = [enter_in_thread(admission, first, release=go_first)]
    assert eventually(lambda: first)
    threads.append(enter_in_thread(admission, alone, alone=True, release=go_alone))
    assert eventually(lambda: admission._alone == 1)
    # a task that comes meanwhile ends at once: sent on the first time, kept if it comes back
    for name in ("advance:a", "tool:b", "advance:a", "tool:b", "advance:a"):
        threads.append(enter_in_thread(admission, later, release=go_alone, redrive=name,
                                       turned_away=turned_away))
        assert eventually(lambda n=len(threads): len(turned_away) == n - 2)
    assert turned_away == [("advance:a", True), ("tool:b", True), ("advance:a", False),
                           ("tool:b", False), ("advance:a", False)]
    assert not later and not alone
    assert admission.released() == []  # the gate is closed: nothing to send yet
    go_first.set()  # the step in flight ends: the alone one runs with nothing beside it
    assert eventually(lambda: alone)
    assert admission.released() == []
    go_alone.set()
    for thread in threads:
        thread.join(5)
    assert admission.released() == ["advance:a", "tool:b"]  # each once, in arrival order
    assert admission.released() == []
    with admission.among_others(lambda: "advance:c") as place:  # the gate is open again
        assert place is not None
    with admission.alone(), pytest.raises(Gated) as gated, admission.among_others(lambda: "advance:a"):
        pass
    assert gated.value.send_now  # a new gate: it may be sent on once again


def test_a_task_waiting_for_room_is_turned_away_when_a_step_starts_waiting_to_run_alone():
    admission, go = Admission(limit=1, starting=1), threading.Event()
    first, waiting, alone, turned_away = [], [], [], []
    threads = [enter_in_thread(admission, first, release=go)]
    assert eventually(lambda: first)
    threads.append(enter_in_thread(admission, waiting, release=go, redrive="tool:w",
                                   turned_away=turned_away))
    assert not eventually(lambda: waiting or turned_away, timeout_s=0.2)  # no room: it waits
    threads.append(enter_in_thread(admission, alone, alone=True, release=go))
    assert eventually(lambda: turned_away == [("tool:w", True)])  # it waits here no more
    go.set()
    for thread in threads:
        thread.join(5)
    assert alone and not waiting
    assert admission.released() == []  # it was sent on


def test_a_step_alone_that_raises_still_opens_the_gate():
    admission = Admission(limit=10, starting=10)
    with pytest.raises(RuntimeError), admission.alone():
        for _ in range(2):  # sent on, then back again: kept
            with pytest.raises(Gated), admission.among_others(lambda: "advance:x"):
                pass
        raise RuntimeError("the step's work failed")
    assert admission.released() == ["advance:x"]
    assert admission.in_flight() == 0
