"""Tenants' shares of the workers where steps are claimed: the operator's cap when the policy
sets one (`running_steps`), else a fair share of the slots the live workers announce for
the step's queue (`agentq.core.shares`), and the announcement of this process's slots.

A share is read per claim, so its inputs are cached for a moment: the slots per queue for
SLOTS_READ_S, the tenants busy on a queue for BUSY_READ_S. A claim counts the tenant's
steps of the queue's kinds exactly (`claims.schedule_and_claim_step_txn`); only who else is
busy may be that stale.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime

from agentq.core.shares import fair_cap
from agentq.store import Store

log = logging.getLogger(__name__)

SLOTS_READ_S = 5.0
BUSY_READ_S = 1.0
ANNOUNCE_S = 10.0  # a worker renews its announcement this often
ANNOUNCE_TTL_S = 3 * ANNOUNCE_S  # and a dead worker's slots count this long at most
MODEL_KINDS = ("llm", "compact")
TOOL_KINDS = ("tool",)


def kinds_beside(kind: str) -> tuple[str, ...]:
    """The step kinds that share the queue of a step of `kind`: model work, or tool calls."""
    return TOOL_KINDS if kind in TOOL_KINDS else MODEL_KINDS


class Shares:
    """How many of a tenant's steps of one queue may run at once, for each claim."""

    def __init__(self, store: Store, clock: Callable[[], datetime],
                 explicit: Callable[[str], int | None]) -> None:
        self._store = store
        self._clock = clock
        self._explicit = explicit
        self._lock = threading.Lock()
        self._slots: tuple[float, dict[str, int]] = (float("-inf"), {})
        self._busy: dict[tuple[str, ...], tuple[float, set[str]]] = {}

    def cap(self, tenant: str, kind: str, queue: str | None
            ) -> tuple[int | None, tuple[str, ...] | None]:
        """The cap for a step of `tenant` of `kind` whose task goes to `queue` (None: not
        known), and the kinds it counts (None: all).

        With no cap here but a queue shared by default, the kinds still come back: the
        step's end wakes what waits for a slot of them. Processes may see different slots
        for a moment (one read before another worker announced its own), and a step that
        ran uncapped in one still frees a slot that steps capped in another wait for.
        """
        explicit = self._explicit(tenant)
        if explicit is not None:
            return explicit, None
        if queue is None:
            return None, None
        kinds = kinds_beside(kind)
        slots = self._queue_slots().get(queue, 0)
        if slots < 2:
            return None, kinds
        return fair_cap(slots, len(self._busy_tenants(kinds) - {tenant})), kinds

    def _queue_slots(self) -> dict[str, int]:
        read_at, slots = self._slots
        if time.monotonic() - read_at < SLOTS_READ_S:
            return slots
        with self._lock:
            if time.monotonic() - self._slots[0] >= SLOTS_READ_S:
                self._slots = (time.monotonic(), self._store.slots.load_per_queue(now=self._clock()))
            return self._slots[1]

    def _busy_tenants(self, kinds: tuple[str, ...]) -> set[str]:
        read_at, busy = self._busy.get(kinds, (float("-inf"), set()))
        if time.monotonic() - read_at < BUSY_READ_S:
            return busy
        with self._lock:
            read_at, busy = self._busy.get(kinds, (float("-inf"), set()))
            if time.monotonic() - read_at >= BUSY_READ_S:
                busy = self._store.slots.list_busy_tenants(kinds, now=self._clock())
                self._busy[kinds] = (time.monotonic(), busy)
            return busy


class SlotOffer:
    """A worker process's announcement of its slots per queue, renewed until it stops."""

    def __init__(self, store: Store, clock: Callable[[], datetime], worker: str,
                 offers: Mapping[str, int]) -> None:
        self._store = store
        self._clock = clock
        self.worker = worker
        self.offers = dict(offers)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> SlotOffer:
        self._thread = threading.Thread(target=self._run, name="agentq-slots", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop renewing, and withdraw the slots at once."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        try:
            self._store.slots.withdraw(self.worker)
        except Exception:  # noqa: BLE001 - they expire anyway
            log.warning("could not withdraw the slots of %s", self.worker, exc_info=True)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._store.slots.announce(self.worker, self.offers, now=self._clock(),
                                           ttl_s=ANNOUNCE_TTL_S)
            except Exception:  # noqa: BLE001 - the database is away: tried again next period
                log.warning("could not announce the slots of %s", self.worker, exc_info=True)
            self._stopping.wait(ANNOUNCE_S)
