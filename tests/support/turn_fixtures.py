"""The runtime and the commands over the test's store, with follow-ups run in-process and a
clock the test moves: the fixtures the runtime's and the commands' tests share (a module
imports them, or sets up its own in their place)."""
from __future__ import annotations

import pytest

from agentq.commands import Commands
from agentq.config import Config
from agentq.runtime import Runtime
from agentq.tools import Registry
from tests.support.clock import Clock
from tests.support.drive import Recorder
from tests.support.rules import Rules
from tests.support.turns import CountingProviders


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def providers():
    return CountingProviders()


@pytest.fixture
def runtime(store, clock, providers):
    registry = Registry.from_modules(["agentq.tools.demo", "tests.support.tools_for_tests"])
    return Runtime(
        store=store, registry=registry, pubsub=Recorder(), config=Config(lease_s=30.0),
        clock=clock, rules=Rules(providers=providers), sleep=lambda s: None,
    )


@pytest.fixture
def commands(runtime, clock):
    return Commands(
        runtime.store, runtime.registry, clock=clock, close_round=runtime.pubsub.close_round
    )
