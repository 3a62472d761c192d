"""About how many bytes a decoded value holds in memory, so caches can be bounded by size.

A count of conversations bounds nothing: one conversation of a thousand turns holds more
than a thousand of one turn. This walks a value (JSON-like data, tuples, frozen
dataclasses) and adds CPython's sizes of the common objects; it is an estimate, within a
small factor of what `sys.getsizeof` would add up to, and cheap enough to run on every
value a cache takes (each value is weighed once, when it is added).
"""
from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

STR = 49  # an empty str; each ASCII character adds one byte
NUMBER = 28
CONTAINER = 56  # an empty list or tuple; each item adds a pointer
DICT = 64  # an empty dict; each item adds a slot and two pointers
POINTER = 8
SLOT = 24
OBJECT = 56  # an instance; its fields are weighed like a dict's
DATETIME = 48


def weight(value: Any) -> int:
    """About how many bytes `value` and everything it holds take."""
    if value is None or isinstance(value, bool):
        return 0  # shared singletons
    if isinstance(value, str):
        return STR + len(value)
    if isinstance(value, (bytes, bytearray)):
        return 33 + len(value)
    if isinstance(value, (int, float)):
        return NUMBER
    if isinstance(value, dict):
        return DICT + sum(SLOT + weight(k) + weight(v) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return CONTAINER + sum(POINTER + weight(item) for item in value)
    if isinstance(value, datetime):
        return DATETIME
    if dataclasses.is_dataclass(value):
        return OBJECT + sum(SLOT + weight(getattr(value, f.name)) for f in dataclasses.fields(value))
    return OBJECT


def total_weight(values: Any) -> int:
    """The weight of each of `values` added up (not counting the sequence that holds them)."""
    return sum(weight(value) for value in values)
