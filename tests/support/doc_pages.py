"""A docs page run as written: its fenced blocks, read by their info string, and its
`agentq dev` line served.

The only change made to a page's command is the port (`--port 0`, then AGENTQ_API_URL for the
page's programs), so that a test never takes a port another program holds.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.processes import ROOT, stop_group, wait_for


def block(page: Path, info: str) -> str:
    """The fenced block of `page` whose info string is `info`."""
    found = re.search(rf"^```{re.escape(info)}\n(.*?)^```$", page.read_text(), flags=re.M | re.S)
    assert found, f"{page.name} has no ```{info} block"
    return found.group(1)


def serve_command(line: str, tmp: Path) -> tuple[list[str], dict[str, str]]:
    """A page's `agentq dev` line as argv and environment, on any free port, its database in `tmp`."""
    words = shlex.split(line.strip())
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTQ_")}
    while "=" in words[0]:
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), str(ROOT)]))
    env["AGENTQ_DATABASE_URL"] = f"sqlite:///{tmp / 'agentq.db'}"  # dev's default, in tmp
    env["PYTHONUNBUFFERED"] = "1"
    program = Path(sys.executable).parent / Path(words[0]).name  # .venv/bin/agentq of this run
    return [str(program), *words[1:], "--port", "0"], env


@contextmanager
def served(line: str, tmp: Path) -> Iterator[tuple[str, dict[str, str], Path]]:
    """`agentq dev` as `line` says, from `tmp`: its URL, its environment and its output's file."""
    argv, env = serve_command(line, tmp)
    log_path = tmp / "dev.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)

    def port() -> str | None:
        text = log_path.read_text(errors="replace")
        if proc.poll() is not None:
            raise RuntimeError(f"agentq dev exited:\n{text}")
        found = re.search(r"API on http://127\.0\.0\.1:(\d+)", text)
        return found and found.group(1)

    try:
        yield f"http://127.0.0.1:{wait_for(port, timeout_s=90, what='agentq dev')}", env, log_path
    finally:
        stop_group(proc)
