"""The slots worker processes offer per queue, announced where steps are claimed, and the
tenants busy on a queue: what a tenant's default share of the workers derives from (inv. 9).

Each worker process announces its slots per queue it takes, and renews the announcement
while it runs; a row past its `expires_at` is a process that died and counts no more. The store's role
is `Slots`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from sqlalchemy import Connection, Engine, delete, func, select

from agentq.store.dialects import Dialect
from agentq.store.engine import begin_read, begin_write
from agentq.store.schema import steps, worker_slots


def announce_slots_txn(conn: Connection, worker: str, offers: Mapping[str, int], *,
                       now: datetime, ttl_s: float) -> None:
    """Replace `worker`'s rows by `offers` (queue -> slots), good for `ttl_s`; drop the rows
    of workers that died (expired)."""
    c = worker_slots.c
    conn.execute(delete(worker_slots).where((c.worker == worker) | (c.expires_at < now)))
    expires_at = now + timedelta(seconds=ttl_s)
    rows = [{"worker": worker, "queue": queue, "slots": slots, "expires_at": expires_at}
            for queue, slots in offers.items()]
    if rows:
        conn.execute(worker_slots.insert(), rows)


def queue_slots_txn(conn: Connection, *, now: datetime) -> dict[str, int]:
    """The slots the live workers offer, per queue."""
    c = worker_slots.c
    query = select(c.queue, func.sum(c.slots)).where(c.expires_at >= now).group_by(c.queue)
    return {queue: int(slots) for queue, slots in conn.execute(query)}


def busy_tenants_txn(conn: Connection, kinds: Sequence[str], *, now: datetime) -> set[str]:
    """The tenants with steps of `kinds` running under a live lease or waiting for a slot."""
    c = steps.c
    live = (c.status == "running") & (c.lease_until >= now)
    query = select(c.tenant).where(c.kind.in_(kinds), live | (c.status == "waiting")).distinct()
    return set(conn.execute(query).scalars())


class Slots:
    """Announcing a worker's slots, and reading what a tenant's default share derives from."""

    def __init__(self, engine: Engine, dialect: Dialect) -> None:
        self._engine = engine
        self._dialect = dialect

    def announce(self, worker: str, offers: Mapping[str, int], *, now: datetime,
                 ttl_s: float) -> None:
        """Say `worker` offers these slots per queue, until `ttl_s` from now."""
        with begin_write(self._engine) as conn:
            announce_slots_txn(conn, worker, offers, now=now, ttl_s=ttl_s)

    def withdraw(self, worker: str) -> None:
        """`worker` stops: its slots are offered no more."""
        with begin_write(self._engine, one_statement=True) as conn:
            conn.execute(delete(worker_slots).where(worker_slots.c.worker == worker))

    def load_per_queue(self, *, now: datetime) -> dict[str, int]:
        """Slots per queue offered by the workers alive now."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return queue_slots_txn(conn, now=now)

    def list_busy_tenants(self, kinds: Sequence[str], *, now: datetime) -> set[str]:
        """Tenants whose steps of `kinds` run or wait for a slot now."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return busy_tenants_txn(conn, kinds, now=now)
