"""docs/quickstart.md, run as written: its tools.py, its `agentq dev` line, its quickstart.py;
and the README's quickstart, which shows those very blocks.

The page's fenced blocks are read by their info string (`python tools.py`, `sh serve`,
`python quickstart.py`, `text output`). The only change is the port: `--port 0` and
AGENTQ_API_URL, so that the test never takes a port another program holds.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import doc_pages
from tests.support.processes import ROOT

PAGE = ROOT / "docs" / "quickstart.md"
README = ROOT / "README.md"
BLOCKS = ("python tools.py", "sh serve", "python quickstart.py", "text output")


def block(info: str, page: Path = PAGE) -> str:
    return doc_pages.block(page, info)


@pytest.mark.parametrize("info", BLOCKS)
def test_the_readme_quickstart_shows_the_blocks_this_test_runs(info):
    assert block(info, README) == block(info)


@pytest.fixture
def dev(tmp_path):
    (tmp_path / "tools.py").write_text(block("python tools.py"))
    with doc_pages.served(block("sh serve"), tmp_path) as (url, env, _):
        yield url, env, tmp_path


def test_the_quickstart_streams_the_answer_and_approves_the_refund_as_the_page_shows(dev):
    url, served_env, tmp = dev
    (tmp / "quickstart.py").write_text(block("python quickstart.py"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTQ_")}
    env.update(AGENTQ_API_URL=url, AGENTQ_API_KEY=served_env["AGENTQ_API_KEY"], PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "quickstart.py"], cwd=tmp, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == block("text output")
