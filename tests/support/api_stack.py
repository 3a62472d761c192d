"""`agentq api` and a Celery worker as real processes on the run's PostgreSQL and Redis.

What an SDK user runs against: the HTTP API in its own process, a worker taking the
steps, nothing in-process. Stopped by pid, with their logs kept for a failing test.
"""
from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx2

from tests.support.processes import ROOT, WorkerProcess, wait_for, worker_env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ApiStack:
    """One `agentq api` process and one worker; `key` is the bootstrap key of tenant `sdk`."""

    def __init__(self, tmp: Path, database_url: str, redis_url: str, *, concurrency: int = 8,
                 **env: str) -> None:
        self.key = "aq_" + secrets.token_urlsafe(24)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = worker_env(database_url, redis_url, redis_url, AGENTQ_API_KEY=f"sdk:{self.key}",
                              **env)
        self.api_log = tmp / "api.log"
        with open(self.api_log, "ab") as log:
            self.api = subprocess.Popen(
                [sys.executable, "-m", "agentq.cli", "api", "--host", "127.0.0.1",
                 "--port", str(self.port)],
                env=self.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        self.worker = WorkerProcess(self.env, tmp / "worker.log", name="sdk",
                                    concurrency=concurrency).start()
        wait_for(self._ready, timeout_s=90, what="the API to be ready")

    def _ready(self) -> bool:
        if self.api.poll() is not None:
            raise RuntimeError(f"agentq api exited:\n{self.api_log.read_text(errors='replace')}")
        try:
            return httpx2.get(self.url + "/readyz", timeout=2, trust_env=False).status_code == 200
        except httpx2.TransportError:
            return False

    def stop(self) -> None:
        if self.api.poll() is None:
            os.killpg(self.api.pid, signal.SIGTERM)
            try:
                self.api.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.api.pid, signal.SIGKILL)
                self.api.wait(timeout=10)
        self.worker.stop()
