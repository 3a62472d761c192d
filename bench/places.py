"""Where the benchmarks run: a PostgreSQL database and a Redis db index of their own.

Both are made for one run and removed at its end, like the test suite's, and the Redis
claim is the one the suite takes, so a benchmark and a test run never share a db.
"""
from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator

import psycopg
import redis

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
REDIS_CLAIM = "agentq:test-claim"


@contextlib.contextmanager
def postgres_database() -> Iterator[str]:
    name = f"agentq_bench_{secrets.token_hex(4)}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def redis_database() -> Iterator[str]:
    token = secrets.token_hex(8)
    for index in range(1, 16):
        client = redis.Redis(host="127.0.0.1", port=6379, db=index)
        if client.set(REDIS_CLAIM, token, nx=True, ex=3600):
            break
        client.close()
    else:
        raise SystemExit("every Redis db 1..15 is claimed")
    try:
        yield f"redis://127.0.0.1:6379/{index}"
    finally:
        client.flushdb()
        client.close()
