"""How one server tool call runs and what of its result goes on: coroutines awaited on every
pool, results cut to the operator's size.

Why `asyncio.run` per call and not one event loop per process: a call's loop is its own,
so a task it leaves behind is cancelled with it instead of running into the next call,
and a tool that blocks its loop (a `time.sleep` in an `async def`) holds up only itself.
It costs about 0.16 ms a call against 0.02 ms on a loop kept per thread
(`bench/async_tools.py`), next to the 2.4 ms floor of a bare task of the same workers.
The price: an asyncio client created at import (bound to no loop yet, then to the first
call's) must not be shared across calls; open it inside the call (`async with`).

Under gevent (a `--pool=gevent` worker, `agentq dev`) every worker "thread" is a greenlet
of one OS thread, and asyncio keeps one running loop per OS thread: two calls would see
each other's loop. There each coroutine runs on a native thread of a gevent thread pool,
whose sockets and selector are still gevent's (every native thread has its own hub), so
`asyncio.to_thread` and DNS lookups work; the calling greenlet waits without blocking the
hub.
"""
from __future__ import annotations

import asyncio
import inspect
import json
import threading
from typing import Any

from agentq.process.cooperative import patched

# A coroutine outliving its call's time limit by this much is cancelled, so an abandoned
# call (the worker already answered "timed out") does not run on forever.
CANCEL_GRACE_S = 1.0
# Native threads running coroutines at once in a patched process; more calls wait their
# turn (within their time limit).
GREEN_LOOP_THREADS = 64


class Coroutines:
    """Runs a tool's awaitable to completion from the thread that called the tool."""

    def __init__(self, *, green_threads: int = GREEN_LOOP_THREADS) -> None:
        self._green_threads = green_threads
        self._pool: Any = None
        self._lock = threading.Lock()

    def run(self, awaitable: Any, timeout_s: float) -> Any:
        """The awaitable's result; what it raises, raised here."""
        main = _within(awaitable, timeout_s + CANCEL_GRACE_S)
        if not patched():
            return asyncio.run(main)
        returned, value = self._native_threads().apply(_run_in_thread, (main,))
        if returned:
            return value
        raise value

    def _native_threads(self) -> Any:
        with self._lock:
            if self._pool is None:
                from gevent.threadpool import ThreadPool

                self._pool = ThreadPool(self._green_threads)
            return self._pool


def _run_in_thread(main: Any) -> tuple[bool, Any]:
    """(True, result) of `main` run on this native thread's own loop, or (False, what it
    raised): handed back to be raised in the calling greenlet, since gevent's pool would
    also print the traceback of an exception raised here, and the caller logs its own."""
    try:
        return True, asyncio.run(main)
    except BaseException as exc:  # raised again by the caller, as it was
        return False, exc


async def _within(awaitable: Any, timeout_s: float) -> Any:
    return await asyncio.wait_for(awaitable, timeout_s)


def awaited(value: Any, coroutines: Coroutines, timeout_s: float) -> Any:
    """`value`, or its result if a tool handed back something to await (an `async def`)."""
    if inspect.isawaitable(value):
        return coroutines.run(value, timeout_s)
    return value


def capped(output: Any, max_chars: int | None) -> Any:
    """`output`, or its first characters and a line saying it was cut and from what size.

    Counted in characters of its JSON text (a string as itself): what the model reads.
    A cut structure becomes a string, since half a JSON document is not one.
    """
    if max_chars is None:
        return output
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    if len(text) <= max_chars:
        return output
    note = f"\n[result cut: {len(text):,} characters, the first {max_chars:,} shown]"
    return text[:max_chars] + note


def capped_parts(output: Any, parts: tuple[dict[str, Any], ...], max_chars: int | None
                 ) -> tuple[dict[str, Any], ...]:
    """The image parts that fit, with the output, in `max_chars` (an image counted by its
    base64 characters): a result's images are capped like its text. None: all of them."""
    if max_chars is None:
        return parts
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    left = max_chars - len(text)
    kept = []
    for part in parts:
        size = len(part.get("data", ""))
        if size > left:
            break  # in order: a later image is not shown without an earlier one
        kept.append(part)
        left -= size
    return tuple(kept)
