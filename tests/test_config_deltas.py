"""AGENTQ_DELTA_WINDOW_S: how long a worker holds a model's deltas to publish them together."""
from __future__ import annotations

import pytest

from agentq.config import Config


def test_the_delta_window_is_read_in_seconds_and_zero_turns_coalescing_off():
    assert Config.from_env({"AGENTQ_DELTA_WINDOW_S": "0.1"}).delta_window_s == 0.1
    assert Config.from_env({"AGENTQ_DELTA_WINDOW_S": "0"}).delta_window_s == 0.0
    assert Config.from_env({}).delta_window_s == Config.delta_window_s > 0


@pytest.mark.parametrize("raw", ["-0.04", "soon"])
def test_a_delta_window_that_is_not_zero_or_positive_is_refused(raw):
    with pytest.raises(ValueError, match="AGENTQ_DELTA_WINDOW_S"):
        Config.from_env({"AGENTQ_DELTA_WINDOW_S": raw})


def test_other_settings_still_refuse_zero():
    with pytest.raises(ValueError, match="AGENTQ_LEASE_S must be positive"):
        Config.from_env({"AGENTQ_LEASE_S": "0"})
