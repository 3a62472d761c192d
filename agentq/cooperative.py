"""Running under gevent (Celery's `-P gevent`): what must hold for a thousand model calls to
share one process, and how blocking work stays off the hub.

A model call mostly waits on the network, so a greenlet per call costs no worker slot. But
anything that blocks the process without yielding (a C driver waiting on its socket, a
tool that computes or calls a blocking library) stalls every call of the process at once:
the database driver must wait cooperatively (the worker checks it at start,
`store.engine.driver_blocks_hub`), and tool calls run on real OS threads.
"""
from __future__ import annotations

import contextvars
import sys
from typing import Any, Callable

# OS threads kept for tool calls under gevent; one that never returns keeps its thread.
TOOL_THREADS = 64


def under_gevent() -> bool:
    """True when gevent has patched the standard library (threads are greenlets then)."""
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and monkey.is_module_patched("socket")


_pool: Any = None


def run_on_os_thread(fn: Callable[[], Any], timeout_s: float) -> tuple[bool, Any]:
    """Under gevent, `fn()` on a real OS thread, waited for cooperatively.

    Returns (True, value), (False, exception) or raises TimeoutError; a call that times out
    is abandoned on its thread, as on the threads pool.
    """
    import gevent
    from gevent.threadpool import ThreadPool

    global _pool
    if _pool is None:
        _pool = ThreadPool(TOOL_THREADS)
    run = contextvars.copy_context().run  # the step's log context

    def call() -> tuple[bool, Any]:
        try:
            return True, run(fn)
        except BaseException as exc:  # the caller decides what a failure means
            return False, exc

    result = _pool.spawn(call)
    try:
        return result.get(timeout=timeout_s)
    except gevent.Timeout:
        raise TimeoutError(f"timed out after {timeout_s:g}s") from None
