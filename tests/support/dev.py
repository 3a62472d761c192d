"""`agentq dev` as a developer runs it: the console script, in a directory of its own, over
HTTP only; its output (stdout and stderr) kept in a file a test reads."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx2

from tests.support.processes import stop_group, wait_for

AGENTQ = str(Path(sys.executable).parent / "agentq")
WAIT_S = 90  # an upper bound on waiting for a start, never a measure of speed


class Dev:
    """`agentq dev ...` in `cwd`, in its own process group, its output in a file."""

    def __init__(self, cwd: Path, *args: str, **env: str) -> None:
        self.cwd = cwd
        self.out = cwd / f"dev-{len(list(cwd.glob('dev-*.log')))}.log"
        clean = {k: v for k, v in os.environ.items()
                 if not k.startswith(("AGENTQ_", "OPENAI_", "ANTHROPIC_")) and k != "PYTHONPATH"}
        clean.update({"PYTHONUNBUFFERED": "1", **env})
        with open(self.out, "ab") as out:
            self.proc = subprocess.Popen([AGENTQ, "dev", "--port", "0", *args], cwd=cwd, env=clean,
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def text(self) -> str:
        return self.out.read_text(errors="replace") if self.out.exists() else ""

    def banners(self) -> list[str]:
        return re.findall(r"agentq dev: API on .*?(?=\nagentq dev|\Z)", self.text(), re.S)

    def wait_banner(self, count: int = 1) -> str:
        def shown() -> str | None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"agentq dev exited with {self.proc.returncode}:\n{self.text()}")
            found = self.banners()
            return len(found) >= count and "API key" in found[count - 1] and found[count - 1]
        return wait_for(shown, timeout_s=WAIT_S, what=f"agentq dev's banner; output:\n{self.text()}")

    def url(self) -> str:
        return re.search(r"API on (http://\S+),", self.text()).group(1)

    def key(self) -> str:
        return re.findall(r"API key of tenant dev: (\S+)", self.text())[-1]

    def client(self, key: str | None = None) -> httpx2.Client:
        return httpx2.Client(base_url=self.url(), headers={"Authorization": f"Bearer {key or self.key()}"},
                             timeout=10, trust_env=False)

    def stop(self) -> None:
        stop_group(self.proc, term_s=30)
