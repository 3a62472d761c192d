"""CPU seconds of processes, read from /proc: steadier from run to run than wall time on a
busy machine, so benchmarks compare changes by it."""
from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterable

from sqlalchemy.engine import Engine

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


def backends_cpu_s(engine: Engine) -> float:
    """CPU seconds of the PostgreSQL backends connected to the engine's database."""
    with engine.connect() as conn:
        pids = conn.exec_driver_sql(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()").scalars().all()
    return sum(process_cpu_s(pid) for pid in pids)


Sample = tuple[float, float, float]  # one turn's latency, this process's CPU, the database's (s)


def per_turn(turn: Callable[[], Callable[[], object]], turns: int, *, engine: Engine,
             warm: int = 5) -> dict[str, float]:
    """Per timed turn, run in this process: latency (p50, p95) and the CPU of this process
    and of the database's backends, in ms. `turn()` sets a turn up, untimed (a new
    conversation, an earlier turn), and returns what runs it; the first `warm` turns warm
    the caches and the pool and are not counted."""
    return figures(samples(turn, turns, engine=engine, warm=warm))


def interleaved(kinds: dict[str, Callable[[], Callable[[], object]]], turns: int, *,
                engine: Engine, rounds: int = 10, warm: int = 5) -> dict[str, dict[str, float]]:
    """`per_turn` of each kind of turn, measured in `rounds` interleaved blocks, so that a
    machine whose load changes meanwhile weighs on every kind alike."""
    found: dict[str, list[Sample]] = {name: [] for name in kinds}
    for index in range(rounds):
        for name, turn in kinds.items():
            block = turns // rounds + (1 if index < turns % rounds else 0)
            found[name] += samples(turn, block, engine=engine, warm=warm if index == 0 else 0)
    return {name: figures(taken) for name, taken in found.items()}


def samples(turn: Callable[[], Callable[[], object]], turns: int, *, engine: Engine,
            warm: int = 5) -> list[Sample]:
    """What `turns` timed turns took each, after `warm` untimed ones."""
    taken = []
    for index in range(turns + warm):
        run = turn()
        cpu0, db0 = process_cpu_s(os.getpid()), backends_cpu_s(engine)
        started = time.perf_counter()
        run()
        elapsed = time.perf_counter() - started
        cpu, db = process_cpu_s(os.getpid()) - cpu0, backends_cpu_s(engine) - db0
        if index >= warm:
            taken.append((elapsed, cpu, db))
    return taken


def figures(taken: list[Sample]) -> dict[str, float]:
    """Latency (p50, p95) and CPU per turn, in ms."""
    latencies = sorted(s[0] for s in taken)
    return {"p50_ms": 1000 * statistics.median(latencies),
            "p95_ms": 1000 * latencies[int(0.95 * (len(latencies) - 1))],
            "cpu_ms": 1000 * sum(s[1] for s in taken) / len(taken),
            "db_cpu_ms": 1000 * sum(s[2] for s in taken) / len(taken)}


def less(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    """What `a` adds over `b`, figure by figure."""
    return {k: a[k] - b[k] for k in a}


def print_rows(rows: Iterable[tuple[str, dict[str, float]]], width: int = 18) -> None:
    """One line per row of `per_turn` figures."""
    for label, row in rows:
        print(f"{label:{width}} turn p50 {row['p50_ms']:7.2f} ms  p95 {row['p95_ms']:7.2f} ms  "
              f"CPU {row['cpu_ms']:6.2f} ms + database {row['db_cpu_ms']:6.2f} ms per turn")
