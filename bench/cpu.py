"""CPU seconds of processes, read from /proc: steadier from run to run than wall time on a
busy machine, so benchmarks compare changes by it."""
from __future__ import annotations

import os

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """utime + stime of one live process (all its threads), in seconds (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) * TICK_S


def group_pids(pgid: int) -> list[int]:
    """Every live process of a process group (a worker and its pool children)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            pids.append(int(entry))
    return pids


def groups_cpu_s(pgids: list[int]) -> float:
    """CPU seconds of every live process of these process groups."""
    return sum(process_cpu_s(pid) for pgid in pgids for pid in group_pids(pgid))
