"""What the guards around a model call cost: its circuit breaker, and publishing a delta.

A model call asks its endpoint's breaker before it goes and tells it how it went (on a
closed breaker: two reads, no write); each streamed delta is checked against its round's
interrupt and appended to the round's text in one Redis transaction, then published.
Prints the median and 95th percentile per call, on each board a deployment may use.

    python bench/guards.py [--calls 2000]

Redis (127.0.0.1:6379) and PostgreSQL (127.0.0.1:5432); every database it makes is
dropped at the end.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import uuid
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from agentq.core.breaker import BreakerPolicy  # noqa: E402
from agentq.live.pubsub import PubSub  # noqa: E402
from agentq.providers.breakers import CircuitBreakers, RedisBoard  # noqa: E402
from agentq.store import Store  # noqa: E402
from bench.places import postgres_database, redis_database  # noqa: E402
from bench.timing import timed  # noqa: E402

ENDPOINT = "https://api.example.test/v1"


def breaker_per_call(board, calls: int) -> tuple[float, float]:
    breakers = CircuitBreakers(board, BreakerPolicy(), clock=lambda: datetime.now(UTC))

    def one_call() -> None:
        breakers.before_call(ENDPOINT)
        breakers.record(ENDPOINT, None)

    return timed(one_call, calls)


def delta_per_publish(url: str, calls: int) -> tuple[float, float]:
    pubsub = PubSub(url)
    round_id = str(uuid.uuid4())
    index = iter(range(10**9))
    return timed(lambda: pubsub.publish("c1", "delta", {
        "round_id": round_id, "turn_id": "t1", "index": next(index), "attempt": 1,
        "text": "a few words ",
    }), calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    calls = parser.parse_args().calls
    rows = []
    with redis_database() as redis_url, postgres_database() as pg_url, \
            tempfile.TemporaryDirectory() as folder:
        client = redis.Redis.from_url(redis_url)
        rows.append(("breaker, Redis board", *breaker_per_call(RedisBoard(client), calls)))
        for name, url in (("PostgreSQL", pg_url), ("SQLite", f"sqlite:///{folder}/guards.db")):
            store = Store.open(url)
            store.migrate()
            rows.append((f"breaker, {name} board", *breaker_per_call(store, calls)))
            store.dispose()
        rows.append(("delta publish, Redis", *delta_per_publish(redis_url, calls)))
        rows.append(("delta publish, in-process", *delta_per_publish("embedded://bench", calls)))
    print(f"{'per call':<28} {'median µs':>10} {'p95 µs':>10}")
    for name, median, p95 in rows:
        print(f"{name:<28} {median:>10.0f} {p95:>10.0f}")


if __name__ == "__main__":
    main()
