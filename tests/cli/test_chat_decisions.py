"""What a person types in `agentq chat` to decide a gated call, edits included."""
from __future__ import annotations

import pytest

from agentq.cli.chat import edited_or_decision_for


@pytest.mark.parametrize("typed, expected", [
    ("a", ("approved", None, None)),
    ('e {"amount": 129.9}', ("approved", None, {"amount": 129.9})),
    ('edit {"order": "A-17", "amount": 1}', ("approved", None, {"order": "A-17", "amount": 1})),
    ("r too much", ("rejected", "too much", None)),
    ("e not json", None),
    ("e [1, 2]", None),
    ("maybe", None),
])
def test_a_typed_decision_approves_as_shown_with_edits_or_rejects(typed, expected):
    assert edited_or_decision_for(typed) == expected
