"""A psycopg connection that waits for PostgreSQL on gevent's hub, for gevent processes.

Why: in a process gevent patched, psycopg waits with its Python `wait_poll`, and gevent's
`select.poll` is a Python emulation that builds a poll object, a result, a watcher per fd and
a timer for every wait, then tears them down: 44,000 of the 151,000 instructions of a short
query (docs/benchmarks.md). `GreenWaiting` parks the greenlet on one libev io watcher,
started and stopped by gevent's compiled hub, and changes nothing else psycopg does.

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


def wait_on_hub(gen: Any, fileno: int) -> Any:
    """Run psycopg's generator `gen` on the socket `fileno`, parking this greenlet on the hub
    while the socket is not ready; what the generator returns."""
    from gevent import get_hub

    hub = get_hub()
    io = hub.loop.io
    try:
        wanted = next(gen)
        while True:
            watcher = io(fileno, int(wanted))
            try:
                hub.wait(watcher)
            finally:
                watcher.close()
            wanted = gen.send(_READY[wanted])
    except StopIteration as done:
        return done.value


class GreenWaiting(psycopg.Connection[Any]):
    """psycopg's connection, waiting on gevent's hub (see the module's docstring)."""

    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        if timeout is not None:
            return super().wait(gen, interval, timeout)
        return wait_on_hub(gen, self.pgconn.socket)
