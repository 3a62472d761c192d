"""The machine's own yardsticks, to report beside a benchmark's figures.

The same code measured on this machine on different days gave peer ratios that flipped
(docs/benchmarks.md, "Three sittings, two kinds of day"): from a fast day to a slow one DBOS's
CPU a step grew 3.1 times and agentq's 2.0 times. They spend it differently: an agentq step
wakes a worker, PostgreSQL and Redis in turn; DBOS's latency scenario switches among a
hundred threads of one process, eight times as many context switches a step. So a sitting
records how fast the machine computes and how fast it wakes a process, with the
hypervisor's steal and the load, to tell which kind of day it ran on:

- `additions_s`: ten million additions in a Python function's loop (compute, one core), and
  `additions_module_s`, the same loop at a module's top level, its names in a dict (the
  yardstick `python3 -c` gave earlier sittings: 0.89 s on a fast day, 1.57 to 2.24 s on slow
  ones, where the function's took 0.66 to 0.84 s on the slowest);
- `wakeup_us`: a one-byte round trip between two processes over pipes, wall time (two
  wakeups of a sleeping process), and `wakeup_cpu_us`, the CPU both spend on it;
- `steal_pct`: the share of CPU time the hypervisor took since the last boot (/proc/stat).

Run it on an idle machine: on a busy one a sleeping process wakes sooner (its CPU is not
brought out of idle), about 12 µs a round trip against 18 to 20 idle on the same evening.

    python bench/machine.py [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import time

ADDITIONS = 10_000_000
ROUND_TRIPS = 50_000


def additions_s(count: int = ADDITIONS) -> float:
    """Seconds for `count` additions in a Python loop."""
    start = time.perf_counter()
    total = 0
    for i in range(count):
        total += i
    return time.perf_counter() - start


_MODULE_LOOP = compile("total = 0\nfor i in range(count):\n    total += i\n", "<additions>", "exec")


def additions_module_s(count: int = ADDITIONS) -> float:
    """Seconds for `count` additions at a module's top level (names looked up in a dict)."""
    start = time.perf_counter()
    exec(_MODULE_LOOP, {"count": count})  # noqa: S102 - a constant loop, compiled above
    return time.perf_counter() - start


def wakeup_us(round_trips: int = ROUND_TRIPS) -> tuple[float, float]:
    """(wall µs, CPU µs of both processes) per one-byte round trip between two processes."""
    from_parent, to_child = os.pipe()  # (read end, write end)
    from_child, to_parent = os.pipe()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    pid = os.fork()
    if pid == 0:  # the child echoes each byte back, then leaves without Python's cleanup
        try:
            for _ in range(round_trips):
                os.read(from_parent, 1)
                os.write(to_parent, b"x")
        finally:
            os._exit(0)
    for fd in (from_parent, to_parent):
        os.close(fd)
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(round_trips):
        os.write(to_child, b"x")
        os.read(from_child, 1)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    os.waitpid(pid, 0)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    child = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    for fd in (to_child, from_child):
        os.close(fd)
    return wall / round_trips * 1e6, (cpu + child) / round_trips * 1e6


def steal_pct(stat: str) -> float:
    """The hypervisor's steal, in percent of all CPU time, from the text of /proc/stat."""
    fields = [int(value) for value in stat.splitlines()[0].split()[1:]]
    steal = fields[7] if len(fields) > 7 else 0
    return 100.0 * steal / max(1, sum(fields[:8]))


def yardsticks() -> dict:
    with open("/proc/stat") as f:
        stat = f.read()
    wall, cpu = wakeup_us()
    return {"additions_s": round(additions_s(), 3),
            "additions_module_s": round(additions_module_s(), 3), "wakeup_us": round(wall, 1),
            "wakeup_cpu_us": round(cpu, 1), "steal_pct": round(steal_pct(stat), 2),
            "load1": os.getloadavg()[0], "cpus": os.cpu_count()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()
    found = yardsticks()
    if args.json:
        print(json.dumps(found))
        return
    print(f"ten million additions {found['additions_s']:.2f} s in a function, "
          f"{found['additions_module_s']:.2f} s at a module's top level; a wakeup round trip "
          f"{found['wakeup_us']:.1f} µs ({found['wakeup_cpu_us']:.1f} µs of CPU); steal "
          f"{found['steal_pct']:.2f}%; load {found['load1']:.2f} on {found['cpus']} CPUs")


if __name__ == "__main__":
    main()
