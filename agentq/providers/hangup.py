"""Hanging up a model call at once: every socket of one call is shut when its cancel is set.

Why sockets: closing an HTTP response from another thread does not wake a read already
blocked in recv(); shutting the socket down does, and the server sees the client go. The
sockets are learnt through the `trace` request extension of the HTTP client, a public
hook, so no transport internals are touched.
"""
from __future__ import annotations

import socket
import threading
from types import TracebackType
from typing import Any

import httpx2

_CONNECTED = "connection.connect_tcp.complete"


class Hangup:
    """Watches `cancel` while one call runs; once it is set, no socket of the call stays open."""

    def __init__(self, cancel: threading.Event, *, poll_s: float = 0.05) -> None:
        self._cancel = cancel
        self._poll_s = poll_s
        self._lock = threading.Lock()
        self._streams: list[Any] = []
        self._done = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="agentq-hangup", daemon=True)

    def http_client(self) -> httpx2.Client:
        """An HTTP client whose connections this hangup shuts on cancel.

        It follows no redirect: a redirect would carry the key's header (Anthropic's
        x-api-key survives a change of host) to an address no profile names (inv. 9).
        """
        return httpx2.Client(follow_redirects=False, event_hooks={"request": [self._traced]})

    def __enter__(self) -> Hangup:
        self._watcher.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # No join: the watcher sees `_done` within poll_s; shutting a finished call's
        # sockets meanwhile is harmless, and the call need not wait for it.
        self._done.set()

    def _traced(self, request: httpx2.Request) -> None:
        request.extensions = {**request.extensions, "trace": self._trace}

    def _trace(self, event: str, info: dict[str, Any]) -> None:
        if event != _CONNECTED:
            return
        stream = info.get("return_value")
        with self._lock:
            self._streams.append(stream)
        if self._cancel.is_set():  # connected after the cancel: shut it right away
            _shut(stream)

    def _watch(self) -> None:
        # Polls, because a plain wait on `cancel` would outlive a call that is never cancelled.
        while not self._done.is_set():
            if self._cancel.wait(self._poll_s):
                with self._lock:
                    streams = list(self._streams)
                for stream in streams:
                    _shut(stream)
                return


def _shut(stream: Any) -> None:
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed by the other side or by the client
