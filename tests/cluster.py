"""Fixtures for tests that run real worker and beat processes on the real Redis and Postgres."""
from __future__ import annotations

import subprocess
import sys

import pytest

from agentq.commands import Commands
from agentq.config import Config
from agentq.tools import Registry
from agentq.worker import create_celery
from tests.processes import ROOT, WorkerProcess, worker_env

FAST_RECOVERY = {"AGENTQ_LEASE_S": "2", "AGENTQ_SWEEP_S": "1"}


@pytest.fixture
def broker(redis_url):
    """A Celery app that only sends, on the test run's own Redis database."""
    app = create_celery(Config(broker_url=redis_url, redis_url=redis_url), runtime=lambda: None)
    yield app
    app.close()


@pytest.fixture
def commands(pg_store_clean):
    registry = Registry.from_modules(["agentq.demo_tools", "tests.tools_for_tests"])
    return Commands(pg_store_clean, registry)


@pytest.fixture
def workers(tmp_path, pg_url, redis_url):
    """Start worker processes; every one is killed by pid when the test ends."""
    started: list[WorkerProcess] = []

    def start(name: str = "w1", concurrency: int = 4, **env_extra: str) -> WorkerProcess:
        env = worker_env(pg_url, redis_url, redis_url, **{**FAST_RECOVERY, **env_extra})
        worker = WorkerProcess(env, tmp_path / f"{name}.log", name=name, concurrency=concurrency)
        started.append(worker.start())
        return worker

    yield start
    for worker in started:
        worker.kill()


@pytest.fixture
def beat(tmp_path, pg_url, redis_url):
    """Start one `celery beat` (the sweeper every second); killed by pid at the end."""
    procs: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        env = worker_env(pg_url, redis_url, redis_url, **FAST_RECOVERY)
        log = open(tmp_path / "beat.log", "ab")
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "agentq.worker:app", "beat", "-l", "WARNING",
             "--schedule", str(tmp_path / "beat-schedule")],
            env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        log.close()
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait(timeout=10)
