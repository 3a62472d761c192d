"""Wall time of a call repeated in one process: for the benches that time a single
operation (a budget check, a breaker's look) rather than a deployment's steps."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def timed(fn: Callable[[], Any], calls: int) -> tuple[float, float]:
    """Median and p95 of `fn()` in microseconds."""
    took = []
    for _ in range(calls):
        started = time.perf_counter()
        fn()
        took.append((time.perf_counter() - started) * 1e6)
    took.sort()
    return statistics.median(took), took[int(len(took) * 0.95)]
