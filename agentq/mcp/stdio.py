"""A stdio MCP server's process for one session: started by the thread that calls the server,
spoken to from the session's event loop over its pipes.

Why not the SDK's `stdio_client`, which starts the process itself: it starts it on the event
loop, and under gevent (`--pool=gevent`, `agentq dev`) that loop runs on a native thread of
its own (agentq.tools.calls), whose hub cannot watch a child process: gevent's subprocess
works from the main thread's hub only ("child watchers are only available on the default
loop"). So the calling thread (a task's greenlet on the main hub, or a thread of a threads
pool) starts the process, the event loop only reads and writes its pipes, and the calling
thread stops it afterwards as the SDK would: its stdin closed, a grace to exit, then SIGTERM
and SIGKILL to its process group.

The server runs with the SDK's default environment (HOME, PATH, USER, …: none of the
worker's secrets) and the server's own `env`, in the worker's working directory. A command
whose program is `python` or `python3` runs under the worker's own interpreter, so a server
sees the packages the worker does; any other program is found on the worker's PATH.
"""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass
from typing import BinaryIO

import anyio
import mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

PYTHON = frozenset({"python", "python3"})  # the worker's own interpreter (sys.executable)
EXIT_GRACE_S = 2.0  # after its stdin closes, then after each signal (as the SDK waits)
READ_BYTES = 65_536
# The session's ends: what the server said (or why a line was no message), what it is sent.
Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception],
                MemoryObjectSendStream[SessionMessage]]


def argv(command: Sequence[str]) -> list[str]:
    """The command line that starts the server: `python` is this worker's interpreter."""
    program, *args = command
    return [sys.executable if program in PYTHON else program, *args]


@dataclass(frozen=True)
class Pipes:
    """Our ends of a started server's stdin and stdout."""

    stdin: BinaryIO
    stdout: BinaryIO


@contextmanager
def started(command: Sequence[str], env: Mapping[str, str]) -> Iterator[Pipes]:
    """The server started from this thread, stopped when the block ends (OSError if it
    cannot start: no such program, not executable)."""
    into, feeds = os.pipe()  # the server reads `into`; we write `feeds`
    drains, out = os.pipe()  # the server writes `out`; we read `drains`
    try:
        process = subprocess.Popen(argv(command), stdin=into, stdout=out,
                                   env={**get_default_environment(), **env},
                                   start_new_session=True)
    except BaseException:
        for fd in (feeds, drains):
            os.close(fd)
        raise
    finally:
        for fd in (into, out):  # the server's ends are the server's now
            os.close(fd)
    pipes = Pipes(os.fdopen(feeds, "wb", buffering=0), os.fdopen(drains, "rb", buffering=0))
    try:
        yield pipes
    finally:
        pipes.stdin.close()  # no-ops if the session closed them: its end of the stdin is EOF
        pipes.stdout.close()
        _stop(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Wait for the server to exit on its closed stdin, then end its process group."""
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=EXIT_GRACE_S)
            return


@asynccontextmanager
async def piped(pipes: Pipes) -> AsyncIterator[Streams]:
    """The session's streams over the server's pipes, on the running event loop: one JSON-RPC
    message a line each way, as the SDK's stdio transport sends and reads them."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    reading, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                              pipes.stdout)
    writing, _ = await loop.connect_write_pipe(asyncio.Protocol, pipes.stdin)
    to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    to_server, from_session = anyio.create_memory_object_stream[SessionMessage](0)

    async def read() -> None:
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            async with to_session:  # the server's EOF ends the session's stream
                rest = b""
                while chunk := await reader.read(READ_BYTES):
                    *lines, rest = (rest + chunk).split(b"\n")
                    for line in lines:
                        await to_session.send(_message(line))

    async def write() -> None:
        async with from_session:
            async for sent in from_session:
                text = sent.message.model_dump_json(by_alias=True, exclude_unset=True)
                writing.write(text.encode() + b"\n")

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read)
            tasks.start_soon(write)
            try:
                yield from_server, to_server
            finally:
                tasks.cancel_scope.cancel()
    finally:
        for stream in (from_server, to_server):
            stream.close()
        writing.close()
        reading.close()


def _message(line: bytes) -> SessionMessage | Exception:
    """One line the server wrote, or why it is no JSON-RPC message (the session says so)."""
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc
