"""What a test does when a service or tool it needs is missing."""
from __future__ import annotations

import os
from typing import NoReturn

import pytest


def unavailable(what: str) -> NoReturn:
    """Fail under CI, where `.ci/run` provides everything; skip on a machine that lacks it."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} is required when CI is set")
    else:
        pytest.skip(f"{what} is not available")
