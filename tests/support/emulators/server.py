"""The HTTP side every emulator shares: a real threaded server on 127.0.0.1, a free port.

A subclass says what its API accepts (`refusal`), how its errors look (`error_body`) and
how it streams (`frames`); this module reads requests, plays the script, writes chunked
server-sent events and notices when a client hangs up.
"""
from __future__ import annotations

import json
import select
import socket
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.emulators.script import Action, ByRequest, Fail, Reply, Reset, Stall

HOLD_LIMIT_S = 10.0
POLL_S = 0.005


class Hangup(Exception):
    """The client went away while we were answering."""


class Emulator:
    """Base of the provider emulators: records every request, answers from `script`."""

    path = "/"

    def __init__(
        self, *, api_key: str = "sk-emulator-0123456789abcdef", max_context_tokens: int = 50_000
    ) -> None:
        self.api_key = api_key
        self.context_limit = max_context_tokens  # what `clear` puts back
        self.max_context_tokens = max_context_tokens
        self.script: deque[Action] = deque()
        self.default: Action = Reply()  # the answer once the script has run out
        self.received: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.refused: list[tuple[int, dict[str, Any]]] = []
        self.hangups: list[float] = []  # time.monotonic() when a client left mid-answer
        self.connections = 0  # TCP connections accepted (each is one handshake)
        self._ids = 0
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.emulator = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    # -- the test's side ---------------------------------------------------------------

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def then(self, *actions: Action) -> Emulator:
        """Answer the next requests with `actions`, in order (then the default reply)."""
        self.script.extend(actions)
        return self

    def clear(self) -> None:
        """Forget what a test scripted, set and saw: the next test starts afresh."""
        self.max_context_tokens = self.context_limit
        self.script.clear()
        self.default = Reply()
        self.received.clear()
        self.headers.clear()
        self.refused.clear()
        self.hangups.clear()

    def wait_for_hangup(self, timeout_s: float = 5.0) -> float | None:
        deadline = time.monotonic() + timeout_s
        while not self.hangups and time.monotonic() < deadline:
            time.sleep(POLL_S)
        return self.hangups[0] if self.hangups else None

    def __enter__(self) -> Emulator:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- what a subclass says about its API --------------------------------------------

    def authorized(self, headers: dict[str, str]) -> tuple[int, str, str] | None:
        """None, or (status, error type, message) refusing the credentials."""
        raise NotImplementedError

    def refusal(self, body: Any, headers: dict[str, str]) -> dict[str, Any] | None:
        """None if the API accepts the request, else its 400 error body."""
        raise NotImplementedError

    def error_body(self, status: int, message: str, kind: str | None, code: str | None) -> dict[str, Any]:
        raise NotImplementedError

    def frames(self, reply: Reply, body: dict[str, Any]) -> Iterator[tuple[str, bytes]]:
        """The SSE frames of a reply, each tagged "text" (hold/cut after these) or "end"."""
        raise NotImplementedError

    def error_frame(self, kind: str) -> bytes:
        raise NotImplementedError

    def next_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}{self._ids:04d}"

    # -- serving -------------------------------------------------------------------------

    def serve(self, handler: _Handler) -> None:
        raw = handler.rfile.read(int(handler.headers.get("content-length") or 0))
        headers = {k.lower(): v for k, v in handler.headers.items()}
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        self.received.append(body)
        self.headers.append(headers)
        if handler.path.split("?")[0] != self.path:
            return self._error(handler, 404, f"no route {handler.path}", "not_found_error", None)
        denied = self.authorized(headers)
        if denied is not None:
            return self._error(handler, denied[0], denied[2], denied[1], "invalid_api_key")
        problem = self.refusal(body, headers)
        if problem is not None:
            self.refused.append((400, problem))
            return _send_json(handler, 400, problem)
        self._play(handler, self.script.popleft() if self.script else self.default, body)

    def _play(self, handler: _Handler, action: Action, body: dict[str, Any]) -> None:
        if isinstance(action, ByRequest):
            action = action.choose(body)
        if isinstance(action, Fail):
            error = self.error_body(action.status, action.message, action.type, action.code)
            return _send_json(handler, action.status, error, action.headers)
        if isinstance(action, Reset):
            return _reset(handler)
        if isinstance(action, Stall):
            if _wait_for_hangup(handler.connection, action.seconds):
                self.hangups.append(time.monotonic())
                return None
            action = action.then
        try:
            self._stream(handler, action, body)
        except Hangup:
            self.hangups.append(time.monotonic())
            handler.close_connection = True

    def _error(self, handler: _Handler, status: int, message: str, kind: str, code: str | None) -> None:
        error = self.error_body(status, message, kind, code)
        self.refused.append((status, error))
        _send_json(handler, status, error)

    def _stream(self, handler: _Handler, reply: Reply, body: dict[str, Any]) -> None:
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream; charset=utf-8")
        handler.send_header("transfer-encoding", "chunked")
        handler.send_header("cache-control", "no-cache")
        handler.end_headers()
        for tag, frame in self.frames(reply, body):
            if tag == "end":
                if reply.hold:
                    return self._hold(handler)
                if reply.cut:
                    return _reset(handler)
                if reply.stop_early:
                    return _write_chunk(handler, b"")
                if reply.error:
                    _write_chunk(handler, self.error_frame(reply.error))
                    return _write_chunk(handler, b"")
            _write_chunk(handler, frame)
            if reply.delay_s:
                time.sleep(reply.delay_s)
        _write_chunk(handler, b"")

    def _hold(self, handler: _Handler) -> None:
        if _wait_for_hangup(handler.connection, HOLD_LIMIT_S):
            raise Hangup()
        handler.close_connection = True


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that leaves without reading everything is routine here, not an error."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.server.emulator.connections += 1  # type: ignore[attr-defined]

    def do_POST(self) -> None:  # noqa: N802 (the http.server name)
        self.server.emulator.serve(self)  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


def _send_json(handler: _Handler, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(len(data)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)


def _write_chunk(handler: _Handler, data: bytes) -> None:
    """One HTTP/1.1 chunk (an empty one ends the body); a hung-up client raises Hangup."""
    if _client_gone(handler.connection):
        raise Hangup()
    try:
        handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        handler.wfile.flush()
    except OSError as exc:
        raise Hangup() from exc


def _client_gone(sock: socket.socket) -> bool:
    """The client sends nothing after its request: readable now means it closed or reset."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _wait_for_hangup(sock: socket.socket, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _client_gone(sock):
            return True
        time.sleep(POLL_S)
    return False


def _reset(handler: _Handler) -> None:
    """Close with a TCP reset, as a crashing proxy or server does."""
    handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handler.connection.close()
    handler.close_connection = True
