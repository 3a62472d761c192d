"""A psycopg cursor whose description is built only when something reads its columns.

SQLAlchemy reads `cursor.description` after every statement, but for a statement it has
run before (its result metadata kept with the compiled form) it only asks whether there is
one. psycopg builds a Column object per column each time: for the 31-column read of a
step's view, a third of what SQLAlchemy adds to the driver's own cost (docs/benchmarks.md).
Here the answer to "is there one, how long is it" costs nothing, and the Columns are built,
once, on the first read of one.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import psycopg
from psycopg import pq

_TUPLES = (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.SINGLE_TUPLE, pq.ExecStatus.TUPLES_CHUNK)


class _ResultOf:
    """What a Column reads of its cursor, kept for one result: the cursor may have run
    another statement by the time a description is read."""

    __slots__ = ("pgresult", "_encoding", "adapters")

    def __init__(self, cursor: psycopg.Cursor[Any], result: pq.abc.PGresult) -> None:
        self.pgresult = result
        self._encoding = cursor._encoding
        self.adapters = cursor.adapters


class Description(Sequence[psycopg.Column]):
    """The columns of one result, as psycopg describes them, built on first read."""

    __slots__ = ("_cursor", "_result", "_columns")

    def __init__(self, cursor: psycopg.Cursor[Any], result: pq.abc.PGresult) -> None:
        self._cursor = cursor
        self._result = result
        self._columns: list[psycopg.Column] | None = None

    def __len__(self) -> int:
        return self._result.nfields

    @overload
    def __getitem__(self, index: int) -> psycopg.Column: ...

    @overload
    def __getitem__(self, index: slice) -> list[psycopg.Column]: ...

    def __getitem__(self, index: int | slice) -> psycopg.Column | list[psycopg.Column]:
        return self._built()[index]

    def _built(self) -> list[psycopg.Column]:
        if self._columns is None:
            cursor: Any = self._cursor
            if cursor.pgresult is not self._result:
                cursor = _ResultOf(self._cursor, self._result)
            self._columns = [psycopg.Column(cursor, i) for i in range(self._result.nfields)]
        return self._columns


class DescribedLazily(psycopg.Cursor[Any]):
    """psycopg's cursor, with a description that is built when read."""

    @property
    def description(self) -> Description | None:  # type: ignore[override]
        result = self.pgresult
        # as psycopg: columns, or none but a result said to hold rows ("SELECT ;")
        if result is not None and (result.nfields or result.status in _TUPLES):
            return Description(self, result)
        return None
