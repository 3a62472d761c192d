"""The Procfile's processes started as docs/operations.md says, on a given database and Redis db.

The command is the page's own `honcho start` line, run by `sh` from the repository with a
PATH that does not hold the virtualenv (as a fresh shell has it), with honcho's base PORT,
FLOWER_PORT and Flower's login (FLOWER_BASIC_AUTH) set to free ports and a fresh password.
Honcho starts each process in a session of its own and, on SIGTERM, stops each one's
process group. The stack remembers every process it saw (the ones honcho reports and
their descendants), so `stop` can prove that none survived, and kill any that did.
"""
from __future__ import annotations

import base64
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.support.api_stack import free_port
from tests.support.processes import ROOT, wait_for

BIN = Path(sys.executable).parent
OPERATIONS = ROOT / "docs" / "operations.md"
PROCESSES = ("web", "worker-model", "worker-tools", "worker-timers", "worker-webhooks", "beat",
             "flower")
STARTED = re.compile(r"([\w-]+)\.1 started \(pid=(\d+)\)")


def documented_command() -> str:
    """The `honcho start` line of operations.md's production block, without its comment."""
    found = re.search(r"^```sh production\n(.*?)^```$", OPERATIONS.read_text(), flags=re.M | re.S)
    assert found, "operations.md has no ```sh production block"
    [line] = [line for line in found.group(1).splitlines() if "honcho start" in line]
    return line.split("  #", 1)[0].strip()


def without_the_venv(path: str) -> str:
    """PATH as a shell that never activated the virtualenv has it."""
    return os.pathsep.join(p for p in path.split(os.pathsep) if p and Path(p) != BIN)

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
    """The documented `honcho start` of the repository's Procfile, with free ports and its own log."""

    def __init__(self, database_url: str, redis_url: str, log_path: Path, **extra_env: str) -> None:
        assert BIN == ROOT / ".venv" / "bin", f"the documented command runs {ROOT}/.venv, not {BIN}"
        self.base_port, self.flower_port = free_port(), free_port()
        self.api = f"http://127.0.0.1:{self.base_port}"
        self.flower = f"http://127.0.0.1:{self.flower_port}"
        self.flower_login = f"ops:{secrets.token_hex(12)}"
        self.log_path = log_path
        self.env = {
            **os.environ,
            "PATH": without_the_venv(os.environ.get("PATH", "")),
            "HOST": "127.0.0.1",
            "PORT": str(self.base_port),  # honcho's base: web gets it
            "FLOWER_PORT": str(self.flower_port),
            "FLOWER_BASIC_AUTH": self.flower_login,
            "AGENTQ_DATABASE_URL": database_url,
            "AGENTQ_BROKER_URL": redis_url,
            "AGENTQ_REDIS_URL": redis_url,
            "AGENTQ_BEAT_SCHEDULE": str(log_path.with_suffix(".beat-schedule")),
            "PYTHONUNBUFFERED": "1",
            **extra_env,
        }
        self.env.pop("FLOWER_UNAUTHENTICATED_API", None)  # the login opens the API
        self.proc: subprocess.Popen | None = None
        self.seen: set[int] = set()

    def start(self) -> ProcfileStack:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                ["sh", "-c", documented_command()], env=self.env, cwd=ROOT, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
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

    def get(self, url: str, timeout_s: float = 5.0, login: str | None = None) -> tuple[int, object]:
        headers = {"Authorization": "Basic " + base64.b64encode(login.encode()).decode()} if login else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                        timeout=timeout_s) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as err:
            return err.code, None
        except (OSError, ValueError):
            return 0, None

    def flower_get(self, path: str) -> tuple[int, object]:
        """GET `path` of Flower's API, with the login the operator set."""
        return self.get(self.flower + path, login=self.flower_login)

    def flower_tasks(self, **query: str) -> dict[str, dict]:
        """Flower's /api/tasks (a map of task id to task), filtered by `query`."""
        params = "&".join(f"{k}={urllib.request.quote(str(v))}" for k, v in query.items())
        status, body = self.flower_get(f"/api/tasks?{params}")
        return body if status == 200 and isinstance(body, dict) else {}

    def stop(self, timeout_s: float = 30.0) -> list[int]:
        """SIGTERM the shell and honcho, which stops every process group it started; SIGKILL
        what is left after `timeout_s`.

        Returns the pids that outlived the orderly stop (killed here), so a test can fail on them.
        """
        if self.proc is None:
            return []
        self.remember_processes()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s  # honcho waits for its processes to end
        while time.monotonic() < deadline and any(_alive(pid) for pid in self.seen):
            time.sleep(0.1)
            self.proc.poll()  # reap the shell
        survivors = sorted(pid for pid in self.seen if _alive(pid))
        for pid in survivors:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=10)
        return survivors
