"""docs/webhooks.md's "On your laptop", run as written: its `agentq dev` line with nothing else
set, its receiver.py (a real HTTP server verifying signatures with `standardwebhooks`) and its
hello.py, each in a process of its own; what the receiver prints is the page's output."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import doc_pages
from tests.support.processes import ROOT, stop_group, wait_for

pytestmark = pytest.mark.slow

PAGE = ROOT / "docs" / "webhooks.md"


def block(info: str) -> str:
    return doc_pages.block(PAGE, info)


def client_env(url: str, served_env: dict[str, str]) -> dict[str, str]:
    """A shell of the developer's: the key the page sets, and the port the test gave dev."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTQ_")}
    env.update(AGENTQ_API_URL=url, AGENTQ_API_KEY=served_env["AGENTQ_API_KEY"], PYTHONPATH=str(ROOT))
    return env


def test_a_receiver_on_the_laptop_verifies_a_delivery_from_agentq_dev_as_the_page_shows(tmp_path: Path):
    for name in ("receiver.py", "hello.py"):
        (tmp_path / name).write_text(block(f"python {name}"))
    with doc_pages.served(block("sh serve"), tmp_path) as (url, served_env, dev_log):
        assert "webhooks: http and loopback URLs allowed (dev only)" in dev_log.read_text()
        env = client_env(url, served_env)
        printed = tmp_path / "receiver.out"
        with open(printed, "wb") as out:
            receiver = subprocess.Popen([sys.executable, "receiver.py"], cwd=tmp_path, env=env,
                                        stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for(lambda: "receiving webhooks" in printed.read_text() or receiver.poll() is not None,
                     timeout_s=60, what="receiver.py to register")
            hello = subprocess.run([sys.executable, "hello.py"], cwd=tmp_path, env=env,
                                   capture_output=True, text=True, timeout=120)
            assert hello.returncode == 0, hello.stderr
            expected = block("text receiver")
            wait_for(lambda: printed.read_text() == expected or receiver.poll() is not None,
                     timeout_s=90, what=lambda: f"the delivery; receiver.py said:\n{printed.read_text()}")
        finally:
            stop_group(receiver)
    assert printed.read_text() == expected
