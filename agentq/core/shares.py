"""A tenant's default share of a queue's slots, when the operator set no cap of its own (inv. 9).

Pure: the slots the live workers offer on the queue and how many other tenants have steps
running or waiting there go in, a cap comes out. One tenant alone may take all but
RESERVE_SLOTS of them, so another tenant's step that arrives finds a slot free at once
instead of queueing behind the whole backlog; once others are busy there, each tenant
holds at most an equal part, so the slots that free go to the tenants below theirs.
"""
from __future__ import annotations

RESERVE_SLOTS = 1


def fair_cap(slots: int, others_busy: int) -> int | None:
    """The most steps of one tenant that may run at once on a queue offering `slots`, while
    `others_busy` other tenants run or wait there; None: no cap (a queue of one slot, or
    slots nobody announced)."""
    if slots < 2:
        return None
    if others_busy == 0:
        return slots - RESERVE_SLOTS
    return max(1, slots // (others_busy + 1))
