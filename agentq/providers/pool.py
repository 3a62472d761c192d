"""One SDK client, and so one HTTP connection pool, per endpoint and key in a process.

Every attempt and every step that calls the same endpoint with the same key reuses the
client, so a model call pays no new TCP and TLS handshake. The pool's sockets are opened
through `WatchedBackend`, which tells the hangup of the call using a connection (on the
calling thread) which socket to shut when that call is cancelled, a reused connection
as well as a new one. Clients are per process: a forked worker builds its own and never
shares a parent's sockets.

Why module-level (`CLIENTS`): connections belong to the process, not to one runtime or
one call, and nothing kept here is needed for correctness; it is a cache.
"""
from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import httpcore2
import httpx2

T = TypeVar("T")
MAX_CLIENTS = 128  # endpoint+key pairs kept per process (tenants' own keys make many)
MAX_CONNECTIONS = 100
MAX_KEEPALIVE = 20
KEEPALIVE_S = 60.0

_calling = threading.local()  # `watcher`: what the call on this thread wants told of its sockets


def watching(watcher: Callable[[Any], None] | None) -> None:
    """Tell `watcher` of every socket this thread reads or writes until set to None again."""
    _calling.watcher = watcher


def _seen(stream: Any) -> None:
    watcher = getattr(_calling, "watcher", None)
    if watcher is not None:
        watcher(stream)


class _WatchedStream(httpcore2.NetworkStream):
    """A network stream that names itself to the calling thread's watcher when it is used."""

    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        _seen(self)
        return self._inner.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        _seen(self)
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore2.NetworkStream:
        return _WatchedStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class WatchedBackend(httpcore2.NetworkBackend):
    """The standard sync backend, its streams watched; counts the connections it opened."""

    def __init__(self) -> None:
        self._inner = httpcore2.SyncBackend()
        self.connections = 0

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore2.NetworkStream:
        stream = self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        self.connections += 1
        watched = _WatchedStream(stream)
        _seen(watched)
        return watched

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore2.NetworkStream:
        return _WatchedStream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _WatchedTransport(httpx2.HTTPTransport):
    """httpx's transport over a pool whose sockets come from a `WatchedBackend`."""

    def __init__(self, backend: WatchedBackend) -> None:
        super().__init__()
        # The one place a transport's pool is replaced: httpx takes no network backend.
        self._pool = httpcore2.ConnectionPool(
            ssl_context=httpx2.create_ssl_context(), network_backend=backend,
            max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_KEEPALIVE,
            keepalive_expiry=KEEPALIVE_S,
        )


def http_client(backend: WatchedBackend | None = None) -> httpx2.Client:
    """A pooled HTTP client whose sockets a call's hangup can shut.

    It follows no redirect: a redirect would carry the key's header (Anthropic's x-api-key
    survives a change of host) to an address no profile names (inv. 9).
    """
    transport = _WatchedTransport(backend or WatchedBackend())
    return httpx2.Client(follow_redirects=False, transport=transport, trust_env=False)


class Clients:
    """SDK clients by (kind, endpoint, key), built once per process, the least used dropped."""

    def __init__(self, limit: int = MAX_CLIENTS) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._clients: OrderedDict[tuple[str, str, str], tuple[Any, WatchedBackend]] = OrderedDict()

    def get(self, kind: str, base_url: str, api_key: str, build: Callable[[httpx2.Client], T]) -> T:
        """The client of this endpoint and key; `build` makes it over a pooled HTTP client."""
        name = (kind, base_url, hashlib.sha256(api_key.encode()).hexdigest())
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's sockets are not ours
                self._clients.clear()
                self._pid = os.getpid()
            if name in self._clients:
                self._clients.move_to_end(name)
                return self._clients[name][0]
            backend = WatchedBackend()
            client = build(http_client(backend))
            self._clients[name] = (client, backend)
            while len(self._clients) > self._limit:
                self._clients.popitem(last=False)  # unreferenced, its pool closes with it
            return client

    def connections(self, kind: str, base_url: str, api_key: str) -> int:
        """How many connections the client of this endpoint and key has opened (for tests)."""
        name = (kind, base_url, hashlib.sha256(api_key.encode()).hexdigest())
        with self._lock:
            entry = self._clients.get(name)
        return entry[1].connections if entry else 0


CLIENTS = Clients()
