"""core/weight.py: the estimate grows with what a value holds, so caches can be bounded by it."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from agentq.core.weight import total_weight, weight


@dataclass(frozen=True)
class Pair:
    left: str
    right: tuple[int, ...]


def test_a_longer_text_weighs_more_by_its_length():
    assert weight("x" * 1000) - weight("x") == 999


def test_containers_weigh_what_they_hold_plus_their_own_slots():
    inner = {"text": "hello", "n": 3}
    assert weight([inner, inner]) > 2 * weight(inner)
    assert weight({"a": inner}) > weight(inner) + weight("a")
    assert weight((1, 2, 3)) < weight((1, 2, 3, 4))


def test_a_dataclass_weighs_its_fields_and_values_are_added_up_one_by_one():
    pair = Pair("x" * 500, (1, 2))
    assert weight(pair) > weight("x" * 500) + weight((1, 2))
    assert total_weight([pair, pair]) == 2 * weight(pair)
    assert weight(datetime(2026, 1, 1, tzinfo=UTC)) > 0 and weight(None) == 0
