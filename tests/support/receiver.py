"""A webhook receiver for tests: a real HTTP server on loopback that keeps every request.

It answers each request with the next status of `script` (then 204), and can hold a request
for `hold_s` seconds first, so a test can kill the sender while its delivery is in flight.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: str


class Receiver:
    def __init__(self, script: list[int] | None = None, hold_s: float = 0.0) -> None:
        self.requests: list[Received] = []
        self.connections = 0
        self.script = list(script or [])
        self.hold_s = hold_s
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server name
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length).decode("utf-8")
                with outer._lock:
                    outer.requests.append(Received(self.path, dict(self.headers.items()), body))
                    status = outer.script.pop(0) if outer.script else 204
                    hold, outer.hold_s = outer.hold_s, 0.0
                if hold:
                    time.sleep(hold)
                self.send_response(status)
                self.send_header("content-length", "27")
                self.end_headers()
                self.wfile.write(b"receiver's private answer\n")

            def log_message(self, *args) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def verify_request(self, request, client_address) -> bool:
                with outer._lock:
                    outer.connections += 1
                return True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks"

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
