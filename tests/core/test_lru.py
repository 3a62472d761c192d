"""WeightedLRU: the bounded map the per-process caches (events, transcripts, parsed settings) share."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentq.core.lru import WeightedLRU


def test_the_least_recently_used_goes_first_when_the_count_is_reached():
    lru: WeightedLRU[str, str] = WeightedLRU(2, 100)
    lru.put("a", "A", 1)
    lru.put("b", "B", 1)
    assert lru.get("a") == ("A", 1)  # a is now the most recently used
    lru.put("c", "C", 1)
    assert lru.get("b") is None and lru.get("a") == ("A", 1) and lru.get("c") == ("C", 1)


def test_the_least_recently_used_go_first_until_the_weight_fits():
    lru: WeightedLRU[str, str] = WeightedLRU(10, 10)
    for key in "abc":
        lru.put(key, key.upper(), 4)
    assert len(lru) == 2 and lru.weight == 8 and lru.get("a") is None


def test_peeking_leaves_the_order_of_use_as_it_is():
    lru: WeightedLRU[str, str] = WeightedLRU(2, 100)
    lru.put("a", "A", 1)
    lru.put("b", "B", 1)
    assert lru.peek("a") == ("A", 1)
    lru.put("c", "C", 1)
    assert lru.peek("a") is None and lru.peek("b") == ("B", 1)


def test_a_value_heavier_than_the_whole_bound_is_not_held_and_drops_the_old_one():
    lru: WeightedLRU[str, str] = WeightedLRU(10, 10)
    lru.put("a", "small", 3)
    lru.put("b", "kept", 3)
    lru.put("a", "huge", 11)
    assert lru.get("a") is None and lru.get("b") == ("kept", 3) and lru.weight == 3


def test_replacing_a_value_counts_only_its_new_weight():
    lru: WeightedLRU[str, str] = WeightedLRU(10, 10)
    lru.put("a", "old", 6)
    lru.put("a", "new", 8)
    assert lru.get("a") == ("new", 8) and lru.weight == 8 and len(lru) == 1


def test_popping_forgets_the_value_and_its_weight_and_an_unknown_key_is_a_no_op():
    lru: WeightedLRU[str, str] = WeightedLRU(10, 10)
    lru.put("a", "A", 4)
    lru.pop("a")
    lru.pop("never")
    assert lru.get("a") is None and lru.weight == 0 and len(lru) == 0


OPS = st.lists(st.tuples(st.sampled_from(["put", "get", "pop"]), st.integers(0, 6),
                         st.integers(0, 30)), max_size=60)


@given(max_items=st.integers(0, 5), max_weight=st.integers(0, 40), ops=OPS)
def test_both_bounds_hold_and_the_weight_is_that_of_what_is_held(max_items, max_weight, ops):
    lru: WeightedLRU[int, int] = WeightedLRU(max_items, max_weight)
    held: dict[int, int] = {}  # what the map must still hold if it holds the key at all
    for op, key, weight in ops:
        if op == "put":
            lru.put(key, key * 100 + weight, weight)
            held[key] = weight
        elif op == "pop":
            lru.pop(key)
            held.pop(key, None)
        else:
            got = lru.get(key)
            assert got is None or got == (key * 100 + held[key], held[key])
        assert len(lru) <= max_items and lru.weight <= max_weight
        kept = {k: w for k, w in held.items() if lru.peek(k) is not None}
        assert lru.weight == sum(kept.values()) and len(lru) == len(kept)
    if ops and ops[-1][0] == "put" and ops[-1][2] <= max_weight and max_items > 0:
        assert lru.peek(ops[-1][1]) is not None  # what was just put stays, if it fits alone
