"""A process's room for steps: claims held to what it can move forward, and a step alone."""
from __future__ import annotations

import threading
import time

from agentq.runtime.admission import Admission


def eventually(condition, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def enter_in_thread(admission: Admission, entered: list, *, alone: bool = False,
                    release: threading.Event) -> threading.Thread:
    def run() -> None:
        with (admission.alone() if alone else admission.among_others()) as place:
            entered.append(place)
            release.wait(10)

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


def test_a_step_alone_waits_for_the_steps_in_flight_and_holds_newcomers_back():
    admission, go_first, go_alone = Admission(limit=100, starting=10), threading.Event(), threading.Event()
    first, alone, later = [], [], []
    threads = [enter_in_thread(admission, first, release=go_first)]
    assert eventually(lambda: first)
    threads.append(enter_in_thread(admission, alone, alone=True, release=go_alone))
    threads.append(enter_in_thread(admission, later, release=go_alone))
    assert not eventually(lambda: alone or later, timeout_s=0.2)
    go_first.set()  # the step in flight ends: the alone one runs, the newcomer still waits
    assert eventually(lambda: alone) and not eventually(lambda: later, timeout_s=0.2)
    go_alone.set()
    assert eventually(lambda: later)
    for thread in threads:
        thread.join(5)
