"""Hanging up a model call at once: every socket of one call is shut when its cancel is set.

Why sockets: closing an HTTP response from another thread does not wake a read already
blocked in recv(); shutting the socket down does, and the server sees the client go. The
sockets are learnt from the pooled clients' network backend (`pool.watching`): each
socket this call's thread reads or writes, a new connection or a reused one. A shut
socket is broken, so the pool drops that connection.
"""
from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType
from typing import Any

from agentq.providers.pool import watching


class Hangup:
    """Watches `cancel` while one call runs; once it is set, no socket of the call stays open."""

    def __init__(self, cancel: threading.Event, *, poll_s: float = 0.05) -> None:
        self._cancel = cancel
        self._poll_s = poll_s
        self._lock = threading.Lock()
        self._streams: list[Any] = []
        self._done = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="agentq-hangup", daemon=True)

    def __enter__(self) -> Hangup:
        watching(self._use)
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
        watching(None)
        with self._lock:  # after this no socket is shut: the pool may lend it to another call
            self._done.set()

    def _use(self, stream: Any) -> None:
        """A socket of this call: shut at once if the call is already cancelled."""
        with self._lock:
            if any(known is stream for known in self._streams):
                return
            self._streams.append(stream)
        if self._cancel.is_set():
            _shut(stream)

    def _watch(self) -> None:
        # Polls, because a plain wait on `cancel` would outlive a call that is never cancelled.
        while not self._done.is_set():
            if self._cancel.wait(self._poll_s):
                with self._lock:
                    if self._done.is_set():
                        return
                    for stream in self._streams:
                        _shut(stream)
                return


def _shut(stream: Any) -> None:
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is None:
        return
    with contextlib.suppress(OSError):  # already closed by the other side or by the client
        sock.shutdown(socket.SHUT_RDWR)
