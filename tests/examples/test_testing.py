"""examples/testing as its user runs it: pytest in the example's folder, a process of its
own, starting `agentq dev` and testing the agent's approved, rejected and refused branches
with no provider key."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.processes import ROOT

pytestmark = pytest.mark.slow

EXAMPLE = ROOT / "examples" / "testing"


def test_the_examples_own_tests_pass_with_no_provider_key():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTQ_", "OPENAI_", "OTEL_"))}
    env.update(PYTHONPATH=str(ROOT))
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                         cwd=EXAMPLE, env=env, text=True, capture_output=True, timeout=240)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "3 passed" in ran.stdout
