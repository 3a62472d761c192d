"""pytest fixtures: `agentq dev` serving this folder's tools and agent on a database of its
own, with no provider key (so the agent runs `support_model`), and a client of it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentq.client import Client

HERE = Path(__file__).resolve().parent
KEY = "test:test-secret"


@pytest.fixture(scope="session")
def agentq_dev(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """The URL of `agentq dev` (API and worker in one process) and its refunds ledger."""
    home = tmp_path_factory.mktemp("agentq")
    ledger = home / "refunds.jsonl"
    env = {**os.environ, "AGENTQ_TOOLS": "tools,agent", "AGENTQ_API_KEY": KEY,
           "AGENTQ_DATABASE_URL": f"sqlite:///{home / 'agentq.db'}", "OPENAI_API_KEY": "",
           "REFUNDS_LEDGER": str(ledger)}
    dev = subprocess.Popen([sys.executable, "-m", "agentq.cli", "dev", "--port", "0"], cwd=HERE,
                           env=env, stdout=subprocess.PIPE, text=True)
    try:
        banner = dev.stdout.readline()  # "agentq dev: API on http://127.0.0.1:PORT, …"
        assert " API on " in banner, f"agentq dev did not start: {banner!r}"
        yield banner.split(" API on ")[1].split(",")[0], ledger
    finally:
        dev.terminate()
        dev.wait(timeout=30)


@pytest.fixture
def client(agentq_dev) -> Iterator[Client]:
    with Client(agentq_dev[0], KEY) as connected:
        yield connected


@pytest.fixture
def paid(agentq_dev):
    """The refunds paid since the test began, as (order id, amount)."""
    ledger = agentq_dev[1]
    before = ledger.read_text().count("\n") if ledger.exists() else 0

    def read() -> list[tuple[str, float]]:
        lines = ledger.read_text().splitlines()[before:] if ledger.exists() else []
        return [(entry["order_id"], entry["amount"]) for entry in map(json.loads, lines)]
    return read
