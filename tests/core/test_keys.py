"""Step keys from content only: never counters (docs/design.md §16.1), never the clock (inv. 7)."""

from __future__ import annotations

import hashlib
import json
import math
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentq.core.keys import (
    AGENTQ_NAMESPACE,
    canonical_json,
    round_id,
    scripted_call_id,
    step_key,
    task_id,
)

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=5)
    ),
    max_leaves=20,
)


def reordered(value, rnd):
    """The same JSON value with every object's keys inserted in a shuffled order."""
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        return {k: reordered(v, rnd) for k, v in items}
    if isinstance(value, list):
        return [reordered(v, rnd) for v in value]
    return value


@settings(max_examples=200, deadline=None)
@given(JSON, st.randoms(use_true_random=False))
def test_canonical_json_does_not_depend_on_key_order(value, rnd):
    assert canonical_json(reordered(value, rnd)) == canonical_json(value)


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_canonical_json_round_trips_through_json(value):
    assert json.loads(canonical_json(value)) == value


def test_canonical_json_has_no_insignificant_whitespace():
    assert canonical_json({"b": [1, 2.5], "a": "é"}) == '{"a":"é","b":[1,2.5]}'


def test_canonical_json_refuses_nan():
    with pytest.raises(ValueError):
        canonical_json({"x": math.nan})


def test_a_step_key_is_sha256_of_conversation_kind_and_canonical_ref():
    expected = hashlib.sha256(b'c1:llm:{"after_seq":3}').hexdigest()
    assert step_key("c1", "llm", {"after_seq": 3}) == expected


def test_step_keys_differ_by_conversation_kind_and_ref():
    keys = {
        step_key("c1", "tool", {"tool_call_id": "x"}),
        step_key("c2", "tool", {"tool_call_id": "x"}),
        step_key("c1", "expire", {"tool_call_id": "x"}),
        step_key("c1", "tool", {"tool_call_id": "y"}),
    }
    assert len(keys) == 4


def test_the_task_id_is_uuid5_of_the_step_key():
    key = step_key("c1", "compact", {"to_seq": 9})
    assert task_id(key) == str(uuid.uuid5(AGENTQ_NAMESPACE, key)) == task_id(key)


def test_a_round_id_is_stable_for_its_llm_step_and_unique_to_it():
    one, two = step_key("c1", "llm", {"after_seq": 1}), step_key("c1", "llm", {"after_seq": 2})
    assert round_id(one) == round_id(one) != round_id(two)


def test_scripted_call_ids_follow_the_documented_formula():
    key = step_key("c1", "llm", {"after_seq": 1})
    assert (
        scripted_call_id(key, 0) == "call_" + hashlib.sha256(f"{key}:0".encode()).hexdigest()[:24]
    )
