"""The Procfile's processes under `honcho start`, on a given database and Redis db.

Honcho starts each process in a session of its own and, on SIGTERM, stops each one's
process group. The stack remembers every process it saw (the ones honcho reports and
their descendants), so `stop` can prove that none survived, and kill any that did.
"""
from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.support.processes import ROOT, wait_for

BIN = Path(sys.executable).parent
PROCESSES = ("web", "worker-model", "worker-tools", "worker-timers", "worker-webhooks", "beat",
             "flower")
STARTED = re.compile(r"([\w-]+)\.1 started \(pid=(\d+)\)")
FLOWER_PORT_OFFSET = 100 * PROCESSES.index("flower")  # honcho: the base port plus 100 a line


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_base_port() -> int:
    """A base for honcho's ports: web gets it, flower (the last process) it plus 500."""
    for _ in range(200):
        base = random.randrange(20000, 32000)  # below the ephemeral range
        if _port_free(base) and _port_free(base + FLOWER_PORT_OFFSET):
            return base
    raise RuntimeError("no free pair of ports for web and flower")


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    try:
        return [int(p) for p in path.read_text().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []


def _alive(pid: int) -> bool:
    """Running and not a zombie (a reparented zombie is dead, only not yet reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class ProcfileStack:
    """`honcho start` on the repository's Procfile, with free ports and its own log."""

    def __init__(self, database_url: str, redis_url: str, log_path: Path, **extra_env: str) -> None:
        self.base_port = free_base_port()
        self.api = f"http://127.0.0.1:{self.base_port}"
        self.flower = f"http://127.0.0.1:{self.base_port + FLOWER_PORT_OFFSET}"
        self.log_path = log_path
        self.env = {
            **os.environ,
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "HOST": "127.0.0.1",
            "AGENTQ_DATABASE_URL": database_url,
            "AGENTQ_BROKER_URL": redis_url,
            "AGENTQ_REDIS_URL": redis_url,
            "AGENTQ_BEAT_SCHEDULE": str(log_path.with_suffix(".beat-schedule")),
            "FLOWER_UNAUTHENTICATED_API": "true",
            "PYTHONUNBUFFERED": "1",
            **extra_env,
        }
        self.env.pop("PORT", None)  # honcho hands out PORT from its base port
        self.proc: subprocess.Popen | None = None
        self.seen: set[int] = set()

    def start(self) -> ProcfileStack:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [str(BIN / "honcho"), "start", "--no-colour", "-f", str(ROOT / "Procfile"),
                 "-d", str(ROOT), "-p", str(self.base_port)],
                env=self.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def process_pids(self) -> dict[str, int]:
        """The pid of each Procfile process, as honcho reported it."""
        return {name: int(pid) for name, pid in STARTED.findall(self.log_text())}

    def remember_processes(self) -> set[int]:
        """Record honcho's whole process tree as it is now; returns what was seen so far."""
        todo = [self.proc.pid] if self.proc else []
        todo += list(self.process_pids().values())
        while todo:
            pid = todo.pop()
            if pid not in self.seen and _alive(pid):
                self.seen.add(pid)
                todo.extend(_children(pid))
        return self.seen

    def wait_ready(self, timeout_s: float = 90.0) -> None:
        """Until the API is ready and Flower has seen a beat-sent sweep succeed on a worker."""
        def ready() -> bool:
            self._check_running()
            return (self.get(self.api + "/readyz")[0] == 200
                    and bool(self.flower_tasks(taskname="agentq.sweep", state="SUCCESS")))
        wait_for(ready, timeout_s=timeout_s, what="the Procfile's processes")
        self.remember_processes()

    def _check_running(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"honcho exited with {self.proc.returncode}:\n{self.log_text()[-4000:]}")

    def get(self, url: str, timeout_s: float = 5.0) -> tuple[int, object]:
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as err:
            return err.code, None
        except (OSError, ValueError):
            return 0, None

    def flower_tasks(self, **query: str) -> dict[str, dict]:
        """Flower's /api/tasks (a map of task id to task), filtered by `query`."""
        params = "&".join(f"{k}={urllib.request.quote(str(v))}" for k, v in query.items())
        status, body = self.get(f"{self.flower}/api/tasks?{params}")
        return body if status == 200 and isinstance(body, dict) else {}

    def stop(self, timeout_s: float = 30.0) -> list[int]:
        """SIGTERM honcho, which stops every process group it started; SIGKILL what is left.

        Returns the pids that outlived the orderly stop (killed here), so a test can fail on them.
        """
        if self.proc is None:
            return []
        self.remember_processes()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(_alive(pid) for pid in self.seen):
            time.sleep(0.1)
        survivors = sorted(pid for pid in self.seen if _alive(pid))
        for pid in survivors:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return survivors
