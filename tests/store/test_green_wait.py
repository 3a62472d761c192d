"""A gevent process's store connections wait for PostgreSQL on gevent's hub
(agentq.store.dialects.green_wait): side by side, with psycopg's errors, and only there."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.support.processes import ROOT

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # each test starts a Python process

PATCHED = """
from gevent import monkey
monkey.patch_all()
import time, gevent, psycopg, sqlalchemy
from sqlalchemy import text
from agentq.store.engine import create_engine
from agentq.store.dialects.green_wait import GreenWaiting

engine = create_engine({url!r}, pool_size=8)
with engine.connect() as conn:
    assert type(conn.connection.driver_connection) is GreenWaiting

ticks = []
def ticking():
    while len(ticks) < 1000:
        ticks.append(1)
        gevent.sleep(0.01)
ticker = gevent.spawn(ticking)

def slow():
    with engine.connect() as conn:
        return conn.execute(text("SELECT pg_sleep(0.5), 7")).one()[1]

started = time.monotonic()
answers = [g.get() for g in [gevent.spawn(slow) for _ in range(8)]]
took_s = time.monotonic() - started
ticker.kill()
assert answers == [7] * 8, answers
print(f"took {{took_s:.2f}} ticks {{len(ticks)}}")

with engine.connect() as conn:  # a statement's error is psycopg's, as without the hub
    try:
        conn.execute(text("SELECT 1 / 0"))
    except sqlalchemy.exc.DataError as exc:
        assert isinstance(exc.orig, psycopg.errors.DivisionByZero)
        print("error DivisionByZero")

with engine.connect() as victim, engine.connect() as killer:
    pid = victim.execute(text("SELECT pg_backend_pid()")).scalar_one()
    waiting = gevent.spawn(lambda: victim.execute(text("SELECT pg_sleep(30)")))
    gevent.sleep(0.3)
    killer.execute(text("SELECT pg_terminate_backend(:pid)"), {{"pid": pid}})
    killer.commit()
    waiting.join(timeout=10)
    assert waiting.ready(), "a wait on a connection the server closed never ended"
    assert isinstance(waiting.exception, sqlalchemy.exc.OperationalError), waiting.exception
    print("terminated OperationalError")
"""

UNPATCHED = """
import psycopg
from agentq.store.engine import create_engine

engine = create_engine({url!r})
with engine.connect() as conn:
    print(type(conn.connection.driver_connection).__name__)
"""


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_a_patched_process_waits_on_the_hub_side_by_side_and_sees_psycopgs_errors(pg_url):
    done = _python(PATCHED.format(url=pg_url))
    assert done.returncode == 0, done.stderr
    took, error, terminated = done.stdout.strip().splitlines()
    took_s, tick_count = float(took.split()[1]), int(took.split()[3])
    assert took_s < 3.0, f"8 queries of 0.5 s took {took_s} s: a wait blocked the hub"
    assert tick_count >= 10, f"another greenlet ran {tick_count} times in {took_s} s"
    assert error == "error DivisionByZero"
    assert terminated == "terminated OperationalError"


def test_an_unpatched_process_keeps_psycopgs_own_connection(pg_url):
    done = _python(UNPATCHED.format(url=pg_url))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Connection"
