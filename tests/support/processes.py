"""Real worker processes for the runtime tests: started, killed with SIGKILL, stopped by pid."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent.parent
# Leases and sweeps short enough that a test sees a dead worker's step taken over.
FAST_RECOVERY = {"AGENTQ_LEASE_S": "2", "AGENTQ_SWEEP_S": "1"}


def worker_env(database_url: str, broker_url: str, redis_url: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        AGENTQ_DATABASE_URL=database_url,
        AGENTQ_BROKER_URL=broker_url,
        AGENTQ_REDIS_URL=redis_url,
        AGENTQ_TOOLS="agentq.tools.demo,tests.support.tools_for_tests",
        PYTHONPATH=str(ROOT),
        AGENTQ_DEMO="on",  # the scripted profile, which a named broker turns off by default
    )
    env.update(extra)
    return env


class WorkerProcess:
    """One `celery worker` in its own process group, so a kill takes its pool children too."""

    def __init__(self, env: dict[str, str], log_path: Path, *, name: str,
                 pool: str = "threads", concurrency: int = 4, queues: str | None = None,
                 include: str | None = None) -> None:
        self.env, self.log_path, self.name = env, log_path, name
        self.pool, self.concurrency = pool, concurrency
        self.queues = queues  # -Q: comma-separated; None takes every queue
        self.include = include  # -I: modules the worker imports too (test hooks)
        self.proc: subprocess.Popen | None = None

    def start(self) -> WorkerProcess:
        log = open(self.log_path, "ab")
        only = ["-Q", self.queues] if self.queues else []
        only += ["-I", self.include] if self.include else []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "agentq.worker:app", "worker",
             "-P", self.pool, "-c", str(self.concurrency), "-n", f"{self.name}@%h", *only,
             "--without-mingle", "--without-gossip",
             "-l", os.environ.get("AGENTQ_TEST_WORKER_LOG_LEVEL", "WARNING")],
            env=self.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        log.close()
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole process group: no clean shutdown, no ack."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)

    def stop(self, timeout_s: float = 10.0) -> None:
        if not self.alive():
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def wait_for(condition: Callable[[], object], *, timeout_s: float = 60.0,
             what: str | Callable[[], str] = "condition"):
    """Poll until `condition()` is truthy; return its value. `what` names what is awaited
    in the timeout's message (a callable: said as things stand at the timeout)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    said = what() if callable(what) else what
    raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {said}")


def stop_group(proc: subprocess.Popen, *, term_s: float = 20.0) -> None:
    """`stop` for a process started in a session of its own: its whole group, children too."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=term_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def stop(proc: subprocess.Popen, *, term_s: float = 15.0) -> None:
    """SIGTERM, then SIGKILL if it is still there after `term_s`; waits for it either way."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=term_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
