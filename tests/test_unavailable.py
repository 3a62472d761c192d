"""A missing service fails the run under CI and only skips elsewhere."""
from __future__ import annotations

import pytest

from tests.support.unavailable import unavailable


def test_a_missing_service_fails_under_ci_and_skips_elsewhere(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="Redis is required when CI is set"):
        unavailable("Redis")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="Redis is not available"):
        unavailable("Redis")
