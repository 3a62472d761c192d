"""gevent for the processes that serve the API (an open stream is a greenlet, not a thread),
and the check that a patched process, API or worker, has a database driver that yields.

`patch_for(argv)` patches the standard library when the command serves the API; it must
run before anything else is imported (the `agentq` command calls it first).
`check_drivers()` refuses to start a patched process whose database driver would block
every greenlet while it waits: psycopg 3 waits cooperatively only with its Python wait
functions, which it picks when gevent patched `select` before psycopg was imported.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence

SERVING = ("api", "dev")


class BlockingDriver(RuntimeError):
    """A patched process whose database driver would still block the event loop."""


def serves_api(argv: Sequence[str]) -> bool:
    """Whether the `agentq` command line serves the API (its first word is `api` or `dev`)."""
    words = [arg for arg in argv if not arg.startswith("-")]
    if words[:1] == ["dev"] and "--reload" in argv:
        return False  # the watcher: its child process serves
    return bool(words) and words[0] in SERVING


def patch_for(argv: Sequence[str]) -> None:
    if serves_api(argv):
        from gevent import monkey

        monkey.patch_all()


def patched() -> bool:
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and monkey.is_module_patched("socket")


def check_drivers() -> None:
    """Raise BlockingDriver if gevent patched this process but psycopg would block it."""
    if not patched():
        return
    from agentq.store.engine import psycopg_waits_in_c

    if psycopg_waits_in_c():
        raise BlockingDriver(
            "psycopg was imported before gevent patched this process, so its queries would "
            "block every open stream; patch first (gunicorn -k gevent does, without --preload "
            "and without importing agentq in its config file)")
