"""SQLAlchemy's cache of compiled statements, found by the statement's own key object first.

SQLAlchemy looks a statement's compiled form up by its cache key: a nested tuple that
describes the whole statement, which it hashes afresh on every execution (tuples keep no
hash). A step's claim and commit are wide statements, and hashing their keys cost about
0.3 ms of CPU a step in-process, ~3% of it (docs/benchmarks.md). A statement built once
and run often (agentq keeps its hot ones as module constants) gives SQLAlchemy the same key
object every time (it memoizes the key on the statement), so that object's identity finds
the compiled form without hashing it. Anything else, a statement built per call, is looked
up by value as before.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy.util import LRUCache

SIZE = 500  # SQLAlchemy's default number of compiled forms kept


class CompiledByStatement:
    """A compiled-statement cache (SQLAlchemy's `compiled_cache` execution option): by the
    identity of the statement's key object, then by its value.

    Careful: relies on the layout of SQLAlchemy's lookup key, (dialect, statement key,
    column names, schema translated, executemany); a key of any other shape is looked up by
    value only. An entry keeps its statement key alive, so the id it is found by cannot
    be taken by another object while it is held.
    """

    def __init__(self, size: int = SIZE) -> None:
        self.size = size
        self._by_value: LRUCache[Any, Any] = LRUCache(size)
        self._by_identity: dict[tuple[Any, ...], tuple[Any, Any]] = {}

    def get(self, key: Any, default: Any = None) -> Any:
        found = self._by_identity.get(_identity(key))
        if found is not None and found[0] is key[1]:
            return found[1]
        compiled = self._by_value.get(key)
        if compiled is None:
            return default
        self._remember(key, compiled)
        return compiled

    def __setitem__(self, key: Any, compiled: Any) -> None:
        self._by_value[key] = compiled
        self._remember(key, compiled)

    def __len__(self) -> int:
        return len(self._by_value)

    def _remember(self, key: Any, compiled: Any) -> None:
        identity = _identity(key)
        if identity == _NONE:
            return
        if len(self._by_identity) >= self.size:  # statements built per call: start afresh
            self._by_identity.clear()
        self._by_identity[identity] = (key[1], compiled)


_NONE: tuple[Any, ...] = ()


def _identity(key: Any) -> tuple[Any, ...]:
    """The lookup key with the statement's key object by its id; () if it is not of the
    shape SQLAlchemy uses."""
    if type(key) is not tuple or len(key) != 5:
        return _NONE
    dialect, statement_key, columns, translated, many = key
    return (id(dialect), id(statement_key), columns, translated, many)
