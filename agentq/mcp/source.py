"""One operator-declared MCP server as a tool source of the registry.

Why a connection per call: the 2026-07-28 specification is stateless (any instance
answers any request), so a step on any worker, or the same step run again after a kill,
needs nothing from an earlier connection. The listing is read once per process and kept
`list_ttl_s` seconds. Each call carries its tool call id in `_meta`
(`agentq/tool_call_id`) so a server can make a repeated call harmless: a step that ran
when its worker died runs again with the same id. Failures that are not a result
(refused connection, 5xx, timeout) are retried within the server's `timeout_s`; then the
call ends with an error result the model reads.
"""
from __future__ import annotations

import functools
import logging
import os
import ssl
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from typing import Any, cast

import anyio
import httpcore2._synchronization  # noqa: F401  (imports trio now: see the note above _tls)
import httpx2
from mcp import Client, MCPError
from mcp.client import Transport
from mcp.client.streamable_http import streamable_http_client
from mcp.types import InputRequiredResult, RequestParamsMeta
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from agentq.core.request import ToolSpec
from agentq.mcp import questions, stdio
from agentq.mcp.results import outcome
from agentq.mcp.stdio import Pipes
from agentq.tenancy.policy import McpServer
from agentq.tools.calls import Coroutines
from agentq.tools.remote import Asked, RemoteResult, RemoteUnavailable

log = logging.getLogger(__name__)

CALL_ID_META = "agentq/tool_call_id"
RETRY_DELAYS_S = (0.2, 1.0)  # after the first and second failed tries
LIST_RETRY_AFTER_S = 10.0
# A server that answers input_required with only state to send back is called again at
# once, this many times at most, this far apart.
STATE_ONLY_ROUNDS = 5
STATE_ONLY_PAUSE_S = 0.05


class McpTools:
    """The tools of the MCP server `server`, as the registry's `RemoteTools`."""

    def __init__(self, server: str, config: McpServer, *, environ: Mapping[str, str] | None = None) -> None:
        self.server = server
        self.config = config
        self._environ = os.environ if environ is None else environ
        self._lock = threading.Lock()
        self._listing: list[ToolSpec] | None = None
        self._listed_at = 0.0
        self._failed_at: float | None = None  # when listing last failed, with no listing to keep
        # The protocol version the server first agreed to, if a stateless (2026-07-28+) one:
        # later connections adopt it instead of probing with server/discover each time.
        self._version: str | None = None
        self._coroutines = Coroutines()
        # The tools' output schemas as a session last read them, and when: a new session is
        # given them, so it does not list the tools again before it checks a call's result.
        self._output_schemas: dict[str, Any] = {}
        self._schemas_at = 0.0

    @property
    def queue(self) -> str | None:
        return self.config.queue

    def listing(self) -> list[ToolSpec]:
        """The server's tools, read at most once per `list_ttl_s` in this process.

        A server that cannot be listed keeps its last listing (its calls fail on their
        own, readably); one never listed is not asked again for LIST_RETRY_AFTER_S, so a
        down server does not hold every model step that names it for its timeout.
        """
        now = time.monotonic()
        with self._lock:
            if self._listing is not None and now - self._listed_at < self.config.list_ttl_s:
                return self._listing
            if self._failed_at is not None and now - self._failed_at < LIST_RETRY_AFTER_S:
                raise RemoteUnavailable("it could not be listed moments ago")
        try:
            listing = self._retried(self._list)
        except RemoteUnavailable:
            with self._lock:
                if self._listing is not None:
                    log.warning("MCP server %r cannot be listed; keeping its last listing",
                                self.server)
                    self._listed_at = time.monotonic()
                    return self._listing
                self._failed_at = time.monotonic()
            raise
        with self._lock:
            self._listing, self._listed_at, self._failed_at = listing, time.monotonic(), None
        return listing

    def call(
        self, tool: str, args: dict[str, Any], call_id: str, timeout_s: float,
        elicitation: dict[str, Any] | None = None,
    ) -> RemoteResult | Asked:
        """One `tools/call` with the call id in `_meta`, and a person's answer to the
        server's last question if it asked one; the server's timeout wins over `timeout_s`."""
        del timeout_s  # the operator's timeout for this server is the one that holds
        return self._retried(
            lambda limit_s: self._call(tool, args, call_id, elicitation, limit_s))

    def _retried(self, attempt: Any) -> Any:
        """`attempt(limit_s)` tried again after a transient failure; each try gets only the
        time left, so all of them together stay within the server's `timeout_s`."""
        deadline = time.monotonic() + self.config.timeout_s
        for delay in (*RETRY_DELAYS_S, None):
            try:
                return attempt(max(deadline - time.monotonic(), 0.001))
            except _Transient as exc:
                left = deadline - time.monotonic()
                if delay is None or left <= delay:
                    raise RemoteUnavailable(str(exc)) from None
                log.warning("MCP server %r failed, trying again: %s", self.server, exc)
                time.sleep(delay)
        raise AssertionError("unreachable")

    def _list(self, limit_s: float) -> list[ToolSpec]:
        async def run(pipes: Pipes | None) -> list[ToolSpec]:
            async with self._connected(pipes) as client:
                self._remember(client)
                specs: list[ToolSpec] = []
                cursor: str | None = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    specs.extend(ToolSpec(name=t.name, description=t.description or "",
                                          parameters=dict(t.input_schema)) for t in page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        return specs
        return self._run(run, limit_s)

    def _call(
        self, tool: str, args: dict[str, Any], call_id: str, elicitation: dict[str, Any] | None,
        limit_s: float,
    ) -> RemoteResult | Asked:
        async def run(pipes: Pipes | None) -> RemoteResult | Asked:
            async with self._connected(pipes) as client:
                self._remember(client)
                lent = self._lend_schemas(client)
                meta = cast(RequestParamsMeta, {CALL_ID_META: call_id})  # an open map
                answers, state = questions.responses(elicitation)
                for _ in range(STATE_ONLY_ROUNDS):
                    try:  # the session's call: it hands back an input_required, not callbacks
                        result = await client.session.call_tool(
                            tool, args, meta=meta, input_responses=answers,
                            request_state=state, allow_input_required=True)
                    except MCPError as exc:  # unknown tool, bad arguments: the model reads why
                        return RemoteResult("error",
                                            f"MCP error {exc.error.code}: {exc.error.message}")
                    if not isinstance(result, InputRequiredResult):
                        self._keep_schemas(client, lent)
                        return outcome(result)
                    found = questions.asked(result)
                    if isinstance(found, str):
                        return RemoteResult("error", found)
                    if found.question:
                        return replace(found, expires_in_s=self.config.answer_within_s)
                    # only state (or roots) to send back: the spec's "call again" at once
                    answers, state = questions.responses({"resume": found.resume})
                    await anyio.sleep(STATE_ONLY_PAUSE_S)
                return RemoteResult("error", "the tool server kept asking to be called again")
        return self._run(run, limit_s)

    def _run(self, work: Any, limit_s: float) -> Any:
        """Run `work` within `limit_s` on an event loop of its own, through the tools'
        coroutine runner: under gevent that is a native thread, never the hub's. A stdio
        server's process is started and stopped here, in the calling thread, and `work`
        gets its pipes (agentq.mcp.stdio says why)."""
        async def bounded(pipes: Pipes | None) -> Any:
            with anyio.fail_after(limit_s):
                return await work(pipes)
        try:
            with self._process() as pipes:
                return self._coroutines.run(bounded(pipes), limit_s)
        except RemoteUnavailable:
            raise
        except TimeoutError:
            raise _Transient(f"no answer within {self.config.timeout_s:g}s") from None
        except (OSError, httpx2.HTTPError, MCPError) as exc:
            raise self._transient(exc) from None
        except BaseExceptionGroup as group:  # what anyio's task groups raise around the cause
            raise self._transient(_first_leaf(group)) from None

    def _transient(self, exc: BaseException) -> _Transient:
        """The failure for the model in words that name no URL, header or token of the
        operator's (httpx's messages carry the URL); the whole of it goes to the worker log."""
        log.warning("MCP server %r: %s", self.server, _describe(exc))
        return _Transient(_for_tenant(exc))

    @contextmanager
    def _process(self) -> Iterator[Pipes | None]:
        """A stdio server's process for one session, started in this thread; None for a
        server over HTTP, whose connection the session makes."""
        if self.config.command is None:
            yield None
            return
        with stdio.started(self.config.command, self._resolved(self.config.env)) as pipes:
            yield pipes

    @asynccontextmanager
    async def _connected(self, pipes: Pipes | None) -> AsyncIterator[Client]:
        """A session with the server over its process's `pipes`, or over HTTP with its
        client closed after it: the SDK closes only a client it made itself."""
        if pipes is not None:
            async with self._client(stdio.piped(pipes)) as client:
                yield client
            return
        url = self.config.url or ""
        http = httpx2.AsyncClient(headers=self._resolved(self.config.headers), verify=_tls(),
                                  timeout=httpx2.Timeout(self.config.timeout_s))
        async with http, self._client(streamable_http_client(url, http_client=http)) as client:
            yield client

    def _client(self, transport: Transport) -> Client:
        return Client(transport, read_timeout_seconds=self.config.timeout_s, cache=None,
                      mode=self._version or "auto")

    def _lend_schemas(self, client: Client) -> bool:
        """Give the session the output schemas an earlier one read (within `list_ttl_s`).

        Why: a session checks a result against its tool's output schema and, not knowing
        it, lists the server's tools first: a second request per call. Careful: this fills
        the SDK session's own map (`_tool_output_schemas`, what its `list_tools` fills);
        `test_a_call_after_the_first_lists_no_tools` notices if that changes.
        """
        fresh = time.monotonic() - self._schemas_at < self.config.list_ttl_s
        known = getattr(client.session, "_tool_output_schemas", None)
        if fresh and isinstance(known, dict) and not known and self._output_schemas:
            known.update(self._output_schemas)
            return True
        return False

    def _keep_schemas(self, client: Client, lent: bool) -> None:
        """Keep what a session that was lent nothing read, if it listed the tools."""
        known = getattr(client.session, "_tool_output_schemas", None)
        if not lent and isinstance(known, dict) and known:
            self._output_schemas, self._schemas_at = dict(known), time.monotonic()

    def _remember(self, client: Client) -> None:
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            self._version = client.protocol_version

    def _resolved(self, values: Mapping[str, str]) -> dict[str, str]:
        """`values` with each "env:NAME" read from the environment; a missing one fails the call."""
        out = {}
        for key, value in values.items():
            if value.startswith("env:"):
                name = value[4:]
                if name not in self._environ:
                    raise RemoteUnavailable(f"the operator's environment lacks {name} "
                                            f"(for the MCP server {self.server!r})")
                value = self._environ[name]
            out[key] = value
        return out


# httpcore imports trio on a client's first request, and importing trio runs a subprocess
# (ctypes' find_library). Under gevent a call runs on a native thread whose hub cannot watch
# a child process (agentq.tools.calls), so this module imports it first, in the main thread.


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every connection: building one per call (loading the CA
    certificates) costs more CPU than the call itself."""
    return ssl.create_default_context()


class _Transient(Exception):
    """A failure worth another try: no result came back."""


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _for_tenant(exc: BaseException) -> str:
    """What a tenant's model may read of a failure: its kind and an HTTP status, no text."""
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"the server answered HTTP {exc.response.status_code}"
    if isinstance(exc, MCPError):
        return f"MCP error {exc.error.code}"
    return type(exc).__name__
