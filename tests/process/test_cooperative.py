"""gevent in the API processes: psycopg waits cooperatively, or the process refuses to start."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from agentq.process.cooperative import serves_api
from tests.support.processes import ROOT

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # each test starts a Python process

SLOW_QUERIES = """
from agentq.process.cooperative import check_drivers, patch_for
patch_for(["api"])
import time, gevent, psycopg
check_drivers()

def slow():
    with psycopg.connect({url!r}) as conn:
        conn.execute("SELECT pg_sleep(0.5)")

started = time.monotonic()
gevent.joinall([gevent.spawn(slow) for _ in range(8)], raise_error=True)
print(f"{{time.monotonic() - started:.2f}}")
"""

TOO_EARLY = """
import psycopg
from agentq.process.cooperative import check_drivers, patch_for
patch_for(["api"])
check_drivers()
"""


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_only_the_commands_that_serve_the_api_are_patched():
    assert serves_api(["api", "--port", "0"]) and serves_api(["-v", "dev"])
    assert not serves_api(["chat"]) and not serves_api(["migrate"]) and not serves_api([])


def test_slow_queries_of_a_patched_process_run_side_by_side(pg_url):
    done = _python(SLOW_QUERIES.format(url=pg_url))
    assert done.returncode == 0, done.stderr
    took_s = float(done.stdout.strip())
    assert took_s < 3.0, f"8 queries of 0.5 s took {took_s} s: psycopg blocked gevent's loop"


def test_a_process_that_imported_psycopg_before_the_patch_refuses_to_start():
    done = _python(TOO_EARLY)
    assert done.returncode != 0
    assert "BlockingDriver" in done.stderr and "psycopg was imported before gevent" in done.stderr


def test_agentq_dev_reload_is_a_watcher_that_serves_nothing_so_it_is_not_patched():
    from agentq.process.cooperative import serves_api

    assert serves_api(["dev", "--port", "0"]) and not serves_api(["dev", "--reload"])
