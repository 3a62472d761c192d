"""What a hostile tenant controls, and an outage, as test doubles on 127.0.0.1.

`Listener` is a host a tenant owns: it records every byte any connection sends it.
`Redirector` is an endpoint that answers every request with a redirect to such a host.
`TcpProxy` stands between agentq and PostgreSQL so a test can take the database away and
bring it back (a restart, as the API sees it) without touching the shared server.
"""
from __future__ import annotations

import http.server
import socket
import threading
from typing import Any


class Listener:
    """Accepts any TCP connection on a free port and keeps what it was sent."""

    def __init__(self) -> None:
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.1)
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def __enter__(self) -> Listener:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1.0)
                data = b""
                try:
                    while len(data) < 65536 and (chunk := conn.recv(4096)):
                        data += chunk
                except OSError:
                    pass
                self.received.append(data or b"<connected>")


class Redirector:
    """An endpoint whose every answer is `307 Location: <target>`: a redirect must not be followed."""

    def __init__(self, target: str) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the http.server name)
                self.send_response(307)
                self.send_header("Location", target + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Redirector:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class TcpProxy:
    """Forwards a local port to `target`; `down()` drops every connection and refuses new ones."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        probe = socket.create_server(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._server: socket.socket | None = None
        self.up()

    def up(self) -> None:
        server = socket.create_server(("127.0.0.1", self.port), reuse_port=False)
        server.settimeout(0.1)
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def down(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        with self._lock:
            sockets, self._open = self._open, []
        for sock in sockets:
            _shut(sock)

    def _accept(self, server: socket.socket) -> None:
        while self._server is server:
            try:
                client, _ = server.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=3)
            except OSError:
                _shut(client)
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            with self._lock:
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    _shut(sink)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
