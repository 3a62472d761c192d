"""A circuit breaker per MCP server: one that keeps failing is not called for a while, and
only the calls that need it fail; against the tests' real MCP server and a closed port."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from agentq.core.breaker import BreakerPolicy
from agentq.core.scope import Scope
from agentq.mcp.source import McpTools
from agentq.providers.breakers import CircuitBreakers
from agentq.tenancy.policy import McpServer
from agentq.tools import Registry, ToolContext
from tests.support.clock import Clock
from tests.support.mcp_servers import free_port
from tests.support.tools_for_tests import lookup

pytestmark = pytest.mark.slow

ALLOWED = ["mcp:crm", "mcp:down", "lookup"]


class _Counted(McpTools):
    """A source that counts the calls it actually makes to its server."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls = 0

    def call(self, *args, **kwargs):
        self.calls += 1
        return super().call(*args, **kwargs)


@pytest.fixture
def setup(sqlite_store, policy):
    clock = Clock(datetime(2026, 7, 28, tzinfo=timezone.utc))
    breakers = CircuitBreakers(sqlite_store.breakers, BreakerPolicy(failures_to_open=2, open_s=60), clock)
    crm = _Counted("crm", policy.mcp["crm"], environ={"CRM_TOKEN": "Bearer t"})
    down = _Counted("down", McpServer(url=f"http://127.0.0.1:{free_port()}/mcp", timeout_s=2))
    registry = Registry([lookup], [crm, down])
    return registry, breakers, clock, crm, down


def _call(registry, breakers, name, args, n=1):
    ctx = ToolContext(f"call_{name}_{n}", "conv_1", Scope(tenant="acme", user="alice"))
    return registry.call(name, args, ctx, timeout_s=10, allowed=ALLOWED, breakers=breakers)


def test_a_server_that_keeps_failing_trips_its_breaker_and_its_calls_then_fail_fast(setup):
    registry, breakers, _, _, down = setup
    for n in (1, 2):
        failed = _call(registry, breakers, "mcp__down__greet", {"name": "x"}, n)
        assert failed.status == "error" and "did not answer" in failed.output
    fast = _call(registry, breakers, "mcp__down__greet", {"name": "x"}, 3)
    assert fast.status == "error"
    assert "tool server 'down' is failing and was not called; try again after" in fast.output
    assert down.calls == 2  # the third call never reached for the server
    (breaker,) = [b for b in breakers.list() if b.endpoint == "mcp:down"]
    assert breaker.state == "open"


def test_a_down_server_fails_only_its_own_calls(setup):
    registry, breakers, _, crm, down = setup
    for n in (1, 2, 3):
        _call(registry, breakers, "mcp__down__greet", {"name": "x"}, n)
    greeted = _call(registry, breakers, "mcp__crm__greet", {"name": "Ada"})
    assert (greeted.status, greeted.output) == ("ok", "Hello, Ada!")
    local = _call(registry, breakers, "lookup", {"key": "k"})
    assert (local.status, local.output) == ("ok", "value of k")
    assert crm.calls == 1
    assert [b.state for b in breakers.list() if b.endpoint == "mcp:crm"] in ([], ["closed"])


def test_once_the_open_time_is_over_one_call_probes_the_server_again(setup):
    registry, breakers, clock, _, down = setup
    for n in (1, 2, 3):
        _call(registry, breakers, "mcp__down__greet", {"name": "x"}, n)
    clock.tick(61)
    probe = _call(registry, breakers, "mcp__down__greet", {"name": "x"}, 4)
    assert "did not answer" in probe.output and down.calls == 3
    (breaker,) = [b for b in breakers.list() if b.endpoint == "mcp:down"]
    assert breaker.state == "open" and breaker.trips == 2  # open again, for twice as long


def test_an_error_result_is_an_answer_and_closes_nothing_it_should_not(setup):
    registry, breakers, _, _, _ = setup
    refused = _call(registry, breakers, "mcp__crm__refund", {"order": "o", "amount": 500})
    assert refused.status == "error" and "above the limit" in refused.output
    assert all(b.state == "closed" and b.failures == 0 for b in breakers.list())
