"""docs/quickstart.md, run as written: its tools.py, its `agentq dev` line, its quickstart.py;
and the README's quickstart, which shows those very blocks.

The page's fenced blocks are read by their info string (`python tools.py`, `sh serve`,
`python quickstart.py`, `text output`). The only change is the port: `--port 0` and
AGENTQ_API_URL, so that the test never takes a port another program holds.
"""
from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import ROOT, wait_for

PAGE = ROOT / "docs" / "quickstart.md"
README = ROOT / "README.md"
BLOCKS = ("python tools.py", "sh serve", "python quickstart.py", "text output")


def block(info: str, page: Path = PAGE) -> str:
    """The fenced block of `page` whose info string is `info`."""
    found = re.search(rf"^```{re.escape(info)}\n(.*?)^```$", page.read_text(), flags=re.M | re.S)
    assert found, f"{page.name} has no ```{info} block"
    return found.group(1)


@pytest.mark.parametrize("info", BLOCKS)
def test_the_readme_quickstart_shows_the_blocks_this_test_runs(info):
    assert block(info, README) == block(info)


def serve_command(tmp: Path) -> tuple[list[str], dict[str, str]]:
    """The page's `agentq dev` line as argv and environment, on any free port."""
    words = shlex.split(block("sh serve").strip())
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTQ_")}
    while "=" in words[0]:
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), str(ROOT)]))
    env["AGENTQ_DATABASE_URL"] = f"sqlite:///{tmp / 'agentq.db'}"  # dev's default, in tmp
    env["PYTHONUNBUFFERED"] = "1"
    program = Path(sys.executable).parent / Path(words[0]).name  # .venv/bin/agentq of this run
    return [str(program), *words[1:], "--port", "0"], env


@pytest.fixture
def dev(tmp_path):
    (tmp_path / "tools.py").write_text(block("python tools.py"))
    argv, env = serve_command(tmp_path)
    log_path = tmp_path / "dev.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)

    def port() -> str | None:
        text = log_path.read_text(errors="replace")
        if proc.poll() is not None:
            raise RuntimeError(f"agentq dev exited:\n{text}")
        found = re.search(r"API on http://127\.0\.0\.1:(\d+)", text)
        return found and found.group(1)

    try:
        yield f"http://127.0.0.1:{wait_for(port, timeout_s=90, what='agentq dev')}", env, tmp_path
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_the_quickstart_streams_the_answer_and_approves_the_refund_as_the_page_shows(dev):
    url, served_env, tmp = dev
    (tmp / "quickstart.py").write_text(block("python quickstart.py"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTQ_")}
    env.update(AGENTQ_API_URL=url, AGENTQ_API_KEY=served_env["AGENTQ_API_KEY"], PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "quickstart.py"], cwd=tmp, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == block("text output")
