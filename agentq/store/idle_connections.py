"""Pooled connections a lone statement left idle, kept for the next statement of the process.

Why: a lone statement (agentq.store.lone) takes a connection from SQLAlchemy's pool and
gives it back, and the pool's checkout and checkin (its queue's lock, which is a green
lock under gevent, the connection's record and proxy, the reset and checkout listeners)
cost a gevent worker 7.5% of its CPU in a run of steps, about 2.3 statements each. A
connection a lone statement leaves idle in autocommit waits here instead, and the next
statement of the process takes the one that waited least.

What the pool promised still holds. Each one kept here is still checked out of the pool,
so the pool's size bounds them with the rest. The store's transactions take from here too
(`checkout`), so none waits on the pool while a connection idles here, and none is kept while
one of them asks the pool (it may be waiting there for this one: it goes back to the pool,
which wakes the caller). Code that opens `engine.connect()` itself, past the store, is not
counted: it may wait for a connection kept here. One that waited longer than the pool's ping
age goes back to the pool, which checks it before use, as it would have. One that was lost,
or is inside a transaction, is never kept. A forked process starts with none (its copies of
its parent's are left alone), and `release` gives them all back to the pool (`dispose`).
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any
from weakref import WeakKeyDictionary

from psycopg.pq import TransactionStatus
from sqlalchemy import Connection, Engine

from agentq.store.dialects import postgres


class _Kept:
    """A pool's idle connections kept here, the one that waited least last, and how many
    callers are asking the pool itself for one now."""

    def __init__(self) -> None:
        self.connections: list[tuple[Any, float]] = []  # (pooled connection, idle since)
        self.asking = 0
        self.counting = threading.Lock()  # `asking` is counted from OS threads too


_KEPT: WeakKeyDictionary[Any, _Kept] = WeakKeyDictionary()  # by pool
# A forked process's copies of its parent's: never used, and never closed, which would end
# the parent's sessions (a closed connection tells the server it is done).
_PARENTS: list[Any] = []


def _forget_parents() -> None:
    _PARENTS.append(dict(_KEPT))
    _KEPT.clear()


os.register_at_fork(after_in_child=_forget_parents)


def _kept(pool: Any) -> _Kept:
    found = _KEPT.get(pool)
    if found is None:
        found = _KEPT[pool] = _Kept()
    return found


def kept(engine: Engine) -> int:
    """How many connections are kept idle here for the engine (each checked out of its pool)."""
    found = _KEPT.get(engine.pool)
    return 0 if found is None else len(found.connections)


def checkout(engine: Engine) -> Any:
    """A pooled connection: the idle one kept here that waited least, else the pool's (a
    driver's error connecting raised as SQLAlchemy's, as `engine.connect()` raises it)."""
    found = _kept(engine.pool)
    pooled = _take(engine, found)
    if pooled is not None:
        return pooled
    with found.counting:
        found.asking += 1
    try:
        # one kept while this caller counted itself (`keep` looked before it did)
        pooled = _take(engine, found)
        return engine.raw_connection() if pooled is None else pooled
    except engine.dialect.loaded_dbapi.Error as exc:
        Connection._handle_dbapi_exception_noconnection(exc, engine.dialect, engine)
    finally:
        with found.counting:
            found.asking -= 1


def _take(engine: Engine, found: _Kept) -> Any:
    """The kept connection that waited least, if it waited less than the pool's ping age;
    else None, and any kept go back to the pool, which checks each before it is used."""
    try:
        pooled, since = found.connections.pop()
    except IndexError:  # none kept (or another thread took the last)
        return None
    if time.monotonic() - since < postgres.PING_AFTER_IDLE_S:
        return pooled
    pooled.close()
    release(engine)  # the rest waited longer still
    return None


def keep(engine: Engine, pooled: Any) -> None:
    """Keep `pooled` for the next statement if a lone statement left it idle in autocommit
    and still valid, and no caller is asking the pool for one (it may be waiting there for
    this one: the pool wakes it at the checkin); else give it back to the pool."""
    driver = pooled.driver_connection
    found = _kept(engine.pool)
    if (not found.asking and pooled.is_valid and driver is not None and driver.autocommit
            and driver.pgconn.transaction_status == TransactionStatus.IDLE):
        found.connections.append((pooled, time.monotonic()))
        # Between OS threads a caller may have counted itself since, found none kept, and
        # be waiting in the pool: then one kept goes back for it. (A caller that counts
        # itself after this look finds this one kept: `checkout` looks again.)
        if found.asking and found.connections:
            found.connections.pop()[0].close()
    else:
        pooled.close()


def release(engine: Engine) -> None:
    """Give every connection kept here back to the pool."""
    idle = _kept(engine.pool).connections
    while idle:
        idle.pop()[0].close()


def dispose(engine: Engine) -> None:
    """Close every connection of the engine's pool, those kept here included."""
    release(engine)
    engine.dispose()
