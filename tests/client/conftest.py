"""The SDK's tests run against a real API process and worker, whose policy offers the tests'
real MCP server as `crm`; `client` is the blocking Client or, with one test body, the
AsyncClient driven through an event loop."""
from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator

import pytest

from agentq.client import AsyncClient, AsyncPage, AsyncTurn, Client
from tests.support.api_stack import ApiStack
from tests.support.mcp_servers import mcp_server, policy_text

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]
STREAM_CAP = 48  # open streams a tenant may hold (the RateLimited test fills it)
PRICES = "\n[prices.scripted]\ninput = 1.5\noutput = 6\n"  # per million tokens


@pytest.fixture(scope="package")
def stack(tmp_path_factory, pg_url, redis_url) -> Iterator[ApiStack]:
    tmp = tmp_path_factory.mktemp("sdk-stack")
    with mcp_server(tmp / "mcp.log", tmp / "mcp-calls.log") as mcp_url:
        (tmp / "policy.toml").write_text(policy_text(mcp_url, tenants='["sdk"]') + PRICES)
        started = ApiStack(tmp, pg_url, redis_url, concurrency=8,
                           AGENTQ_MAX_STREAMS_PER_TENANT=str(STREAM_CAP),
                           AGENTQ_POLICY=str(tmp / "policy.toml"), CRM_TOKEN="Bearer t0ken")
        try:
            yield started
        finally:
            started.stop()


class Blocking:
    """An AsyncClient (or AsyncTurn, or AsyncPage) whose every method is run to completion on
    `loop`: one test body checks both clients, method for method."""

    def __init__(self, target, loop: asyncio.AbstractEventLoop) -> None:
        self._target, self._loop = target, loop

    def __getattr__(self, name: str):
        value = getattr(self._target, name)
        if not callable(value):
            return value

        def call(*args, **kwargs):
            result = value(*args, **kwargs)
            if inspect.isasyncgen(result):
                return self._iterate(result)
            if inspect.iscoroutine(result):
                result = self._loop.run_until_complete(result)
            return self._wrapped(result)

        return call

    def __iter__(self):  # an AsyncPage: `async for` over every item
        return self._iterate(aiter(self._target))

    def _wrapped(self, result):
        return Blocking(result, self._loop) if isinstance(result, AsyncTurn | AsyncPage) else result

    def _iterate(self, agen):
        while True:
            try:
                yield self._wrapped(self._loop.run_until_complete(agen.__anext__()))
            except StopAsyncIteration:
                return


@pytest.fixture(params=["sync", "async"])
def client(request, stack: ApiStack):
    if request.param == "sync":
        with Client(stack.url, stack.key) as sync:
            yield sync
        return
    loop = asyncio.new_event_loop()
    async_client = AsyncClient(stack.url, stack.key)
    try:
        yield Blocking(async_client, loop)
    finally:
        loop.run_until_complete(async_client.close())
        loop.close()
