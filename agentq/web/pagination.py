"""One page of a keyset-paginated list: the rows up to `limit`, and the cursor of the next page.

Each list route reads one row more than it answers: whether that row exists says whether
another page follows, without a count. The query models (agentq/api) bound `limit` and
check the cursor's shape, so a tenant's hostile `limit` or cursor is a 400 before any read.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

Row = TypeVar("Row")
Cursor = TypeVar("Cursor")


@dataclass(frozen=True)
class Page(Generic[Row, Cursor]):
    """The rows of one page, and the cursor a client sends for the next (None: the last page)."""

    rows: list[Row]
    next_cursor: Cursor | None


def page_of(read: Callable[[int], Sequence[Row]], limit: int,
            cursor_of: Callable[[Row], Cursor]) -> Page[Row, Cursor]:
    """The page `read(limit + 1)` begins: at most `limit` rows, and the next page's cursor,
    the cursor of its last row, if `read` found more."""
    found = read(limit + 1)
    rows = list(found[:limit])
    more = len(found) > limit and bool(rows)
    return Page(rows, cursor_of(rows[-1]) if more else None)
