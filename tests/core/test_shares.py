"""A tenant's default share of a queue's slots."""
from __future__ import annotations

from agentq.core.shares import RESERVE_SLOTS, fair_cap


def test_a_tenant_alone_on_a_queue_may_take_all_its_slots_but_the_reserve():
    assert fair_cap(4, 0) == 4 - RESERVE_SLOTS
    assert fair_cap(1000, 0) == 1000 - RESERVE_SLOTS


def test_with_other_tenants_busy_a_tenant_holds_at_most_an_equal_part():
    assert fair_cap(4, 1) == 2
    assert fair_cap(16, 3) == 4
    assert fair_cap(4, 9) == 1  # never less than one slot


def test_a_queue_of_one_slot_or_of_no_announced_slots_has_no_default_cap():
    assert fair_cap(1, 0) is None and fair_cap(0, 3) is None
