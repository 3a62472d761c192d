"""The outbox: a webhook delivery row for each occurrence, written by the append that logs it.

`append_at_txn` calls `record_outbox_txn` in its own transaction, so an event and the
news of it commit or vanish together; the relay (agentq.webhooks.delivery) sends them.
On PostgreSQL the append reads the tenant's endpoints in the statement that moves the log
(`endpoints_of`), so a tenant without webhooks pays no round trip for them.
"""
from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, select

from agentq.core.occurrences import Occurrence
from agentq.store.engine import insert_ignoring
from agentq.store.schema import webhook_deliveries, webhook_endpoints

_NAMESPACE = uuid.UUID("6f0d1c9e-4c39-4b47-9a53-1f4c1c7d5e21")


def delivery_id(endpoint_id: str, conversation_id: str, occurrence: Occurrence) -> str:
    """The stable `webhook-id`: derived from the endpoint and the log event (inv. 10)."""
    return "msg_" + uuid.uuid5(
        _NAMESPACE, f"{endpoint_id}:{conversation_id}:{occurrence.key}").hex


def endpoints_of(tenant: Any) -> Any:
    """The enabled endpoints of `tenant` (a column or value) as one JSON array of
    [id, event_types] pairs, NULL when it has none: a scalar subquery (PostgreSQL) that a
    writer's statement reads beside its own work."""
    e = webhook_endpoints.c
    return (
        select(func.json_agg(func.json_build_array(e.id, e.event_types)))
        .where(e.tenant == tenant, e.enabled.is_(True))
        .scalar_subquery()
    )


def record_outbox_txn(
    conn: Connection, *, tenant: str, conversation_id: str, occurrences: Sequence[Occurrence],
    now: datetime, endpoints: Sequence[Sequence[Any]] | None = None,
) -> int:
    """Write a delivery for each enabled endpoint of the tenant that wants the occurrence,
    in the caller's transaction; a replayed occurrence writes nothing new (inv. 5).

    `endpoints`: the tenant's enabled (id, event_types), read already in this transaction
    (`endpoints_of`); else they are read here.
    """
    if not occurrences:
        return 0
    if endpoints is None:
        e = webhook_endpoints.c
        endpoints = conn.execute(
            select(e.id, e.event_types).where(e.tenant == tenant, e.enabled.is_(True))
        ).all()
    wanted = endpoints
    rows = [
        {"id": delivery_id(endpoint_id, conversation_id, o), "endpoint_id": endpoint_id,
         "tenant": tenant, "conversation_id": conversation_id, "seq": o.seq,
         "event_type": o.type, "ref": o.ref, "status": "pending", "attempts": 0,
         "next_attempt_at": now, "lease_until": None, "last_status_code": None,
         "attempt_log": [], "created_at": now, "delivered_at": None}
        for endpoint_id, types in wanted for o in occurrences if o.type in (types or ())
    ]
    if rows:
        conn.execute(insert_ignoring(conn, webhook_deliveries), rows)
    return len(rows)
