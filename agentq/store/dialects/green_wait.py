"""A psycopg connection that waits for PostgreSQL on gevent's hub, for gevent processes.

Why: in a process gevent patched, psycopg waits with its Python `wait_poll`, and gevent's
`select.poll` is a Python emulation that builds a poll object, a result, a watcher per fd and
a timer for every wait, then tears them down: 44,000 of the 151,000 instructions of a short
query (docs/benchmarks.md). `GreenWaiting` parks the greenlet on a libev io watcher the
connection keeps, started and stopped by gevent's compiled hub, and changes nothing else
psycopg does.

It waits without psycopg's `interval`: that wake-up lets a blocking wait notice Ctrl-C, and
under gevent the signal reaches the hub, not a greenlet parked on a query. A socket the
server closes turns readable, and libpq reports the error, as with psycopg's own waits; a
connection is used by the one greenlet that checked it out, so no other closes it under a
wait. A wait with a deadline (`timeout`), which psycopg asks for only when it cancels or
closes, keeps psycopg's own function.
"""
from __future__ import annotations

import sys
from typing import Any

import psycopg
from psycopg.waiting import Ready, Wait

# libev's event bits are selectors' (1 read, 2 write), as psycopg's Wait and Ready are.
_READY = {Wait.R: Ready.R, Wait.W: Ready.W, Wait.RW: Ready.RW}


def patched() -> bool:
    """gevent patched this process's `select` (psycopg's own test before it picks a Python
    wait); gevent is imported only where it did."""
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and monkey.is_module_patched("select")


def wait_on_hub(gen: Any, fileno: int, watchers: dict[Any, Any] | None = None) -> Any:
    """Run psycopg's generator `gen` on the socket `fileno`, parking this greenlet on the hub
    while the socket is not ready; what the generator returns. `watchers` keeps the io
    watcher of each wait on the hub's loop, to start again at the next wait on the same
    socket (a watcher is stopped after each wait), instead of making and closing one."""
    from gevent import get_hub

    hub = get_hub()
    kept = {} if watchers is None else watchers
    try:
        wanted = next(gen)
        while True:
            watcher = kept.get(wanted)
            if watcher is None or watcher.loop is not hub.loop:
                watcher = kept[wanted] = hub.loop.io(fileno, int(wanted))
            hub.wait(watcher)
            wanted = gen.send(_READY[wanted])
    except StopIteration as done:
        return done.value


class GreenWaiting(psycopg.Connection[Any]):
    """psycopg's connection, waiting on gevent's hub (see the module's docstring)."""

    _watchers: dict[Any, Any] | None = None  # by what a wait wants: made at its first wait

    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        if timeout is not None:
            return super().wait(gen, interval, timeout)
        if self._watchers is None:
            self._watchers = {}
        return wait_on_hub(gen, self.pgconn.socket, self._watchers)

    def close(self) -> None:
        watchers, self._watchers = self._watchers or {}, None
        try:
            for watcher in watchers.values():
                watcher.close()
        finally:
            super().close()
