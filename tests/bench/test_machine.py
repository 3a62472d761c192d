"""bench/machine.py's yardsticks: the steal read from /proc/stat's first line, and a wakeup
round trip measured between two real processes."""
from __future__ import annotations

import os

from bench.machine import steal_pct, wakeup_us


def test_steal_is_its_share_of_all_cpu_time_and_guest_time_is_not_counted_twice():
    # user nice system idle iowait irq softirq steal guest guest_nice
    stat = "cpu  600 0 100 200 50 0 10 40 300 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"
    assert steal_pct(stat) == 4.0  # 40 of 1,000: guest is already inside user


def test_a_kernel_without_a_steal_field_has_none():
    assert steal_pct("cpu  10 0 10 80\n") == 0.0


def test_a_wakeup_round_trip_costs_wall_and_cpu_time_and_leaves_no_child():
    before = _children()
    wall, cpu = wakeup_us(round_trips=200)
    assert wall > 0 and cpu > 0
    assert _children() == before  # the echoing child is gone, reaped


def _children() -> set[int]:
    """This process's children, from /proc (another test's may be running beside it)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid():
                found.add(int(entry))
    return found
