"""A least-recently-used map bounded by both a count of entries and their total weight.

Why not `cachetools.LRUCache`: it has one bound (a total of `getsizeof`), and agentq's
per-process caches have two, `conversations` and `max_bytes`, whichever is reached first;
it also refuses a value heavier than the whole bound with an error, where these caches
drop the stale entry and keep nothing. The weight is given with each value, so a caller
that knows what grew weighs only that (core/weight.py).

Not thread-safe: the caches that hold one use it under their own lock.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class WeightedLRU(Generic[K, V]):
    """At most `max_items` values and `max_weight` of weight, the least recently used going first."""

    def __init__(self, max_items: int, max_weight: int) -> None:
        self.max_items = max_items
        self.max_weight = max_weight
        self._held: OrderedDict[K, tuple[V, int]] = OrderedDict()  # the value and its weight
        self._weight = 0

    @property
    def weight(self) -> int:
        """The total weight of the values held."""
        return self._weight

    def __len__(self) -> int:
        return len(self._held)

    def get(self, key: K) -> tuple[V, int] | None:
        """The value and its weight, now the most recently used; None if not held."""
        held = self._held.get(key)
        if held is not None:
            self._held.move_to_end(key)
        return held

    def peek(self, key: K) -> tuple[V, int] | None:
        """The value and its weight, leaving the order of use as it is."""
        return self._held.get(key)

    def put(self, key: K, value: V, weight: int) -> None:
        """Hold `value` in place of what `key` held, evicting the least recently used until
        both bounds hold; a value heavier than `max_weight` only drops the old one."""
        self.pop(key)
        if weight > self.max_weight:
            return
        self._held[key] = (value, weight)
        self._weight += weight
        while len(self._held) > self.max_items or self._weight > self.max_weight:
            _, (_, evicted) = self._held.popitem(last=False)
            self._weight -= evicted

    def pop(self, key: K) -> None:
        """Forget what `key` holds, if anything."""
        held = self._held.pop(key, None)
        if held is not None:
            self._weight -= held[1]
