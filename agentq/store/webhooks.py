"""Webhook endpoints and the outbox of their deliveries, as the store holds them.

An endpoint's secret is sealed text here (agentq.tenancy.keybox seals and opens it). A
delivery row is written in the transaction that appends the log event causing it
(agentq.store.outbox). Deliveries move by conditional updates (`claim_due_deliveries`,
`finish_delivery`), so a relay or a worker that runs twice changes nothing the second
time.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, and_, delete, func, or_, select, update

from agentq.core.events import Event
from agentq.store.dialects import Dialect
from agentq.store.engine import begin_read, begin_write
from agentq.store.schema import events, record_from_row, record_values, webhook_deliveries, webhook_endpoints
from agentq.store.views import list_events_txn

ATTEMPT_LOG_KEEP = 20  # the latest attempts a delivery row keeps


@dataclass(frozen=True)
class WebhookEndpoint:
    """A tenant's endpoint; `sealed_secret` never leaves the store and the keybox in clear."""

    id: str
    tenant: str
    url: str
    event_types: list[str]
    sealed_secret: str = field(repr=False)
    previous_sealed: str | None = field(repr=False)
    previous_until: datetime | None
    enabled: bool
    disabled_reason: str | None
    failing_since: datetime | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class WebhookDelivery:
    """One occurrence for one endpoint: its id is the `webhook-id` of every attempt."""

    id: str
    endpoint_id: str
    tenant: str
    conversation_id: str
    seq: int
    event_type: str
    ref: dict[str, Any]
    status: str
    attempts: int
    next_attempt_at: datetime
    lease_until: datetime | None
    last_status_code: int | None
    attempt_log: list[dict[str, Any]]
    created_at: datetime
    delivered_at: datetime | None


class Webhooks:
    """Webhook endpoints and the outbox of their deliveries."""

    def __init__(self, engine: Engine, dialect: Dialect) -> None:
        self._engine = engine
        self._dialect = dialect

    # endpoints

    def add_endpoint(self, endpoint: WebhookEndpoint, *, max_per_tenant: int) -> bool:
        """Insert the endpoint unless its tenant already has `max_per_tenant`; False then."""
        e = webhook_endpoints.c
        with begin_write(self._engine) as conn:
            count = conn.execute(
                select(func.count()).where(e.tenant == endpoint.tenant)).scalar_one()
            if count >= max_per_tenant:
                return False
            conn.execute(webhook_endpoints.insert(), [record_values(endpoint)])
        return True

    def list_endpoints(self, tenant: str) -> list[WebhookEndpoint]:
        e = webhook_endpoints.c
        with begin_read(self._engine, one_snapshot=False) as conn:
            rows = conn.execute(select(webhook_endpoints).where(e.tenant == tenant)
                                .order_by(e.created_at, e.id))
            return [record_from_row(WebhookEndpoint, row) for row in rows]

    def load_endpoint(self, endpoint_id: str, *, tenant: str | None = None
                      ) -> WebhookEndpoint | None:
        """The endpoint, or None if absent or another `tenant`'s."""
        e = webhook_endpoints.c
        with begin_read(self._engine, one_snapshot=False) as conn:
            row = conn.execute(select(webhook_endpoints).where(e.id == endpoint_id)).first()
        found = None if row is None else record_from_row(WebhookEndpoint, row)
        if found is None or (tenant is not None and found.tenant != tenant):
            return None
        return found

    def update_endpoint(self, endpoint_id: str, *, tenant: str, now: datetime,
                        **values: Any) -> bool:
        """Change the named columns of the tenant's endpoint; False if it has none such."""
        e = webhook_endpoints.c
        with begin_write(self._engine) as conn:
            done = conn.execute(update(webhook_endpoints)
                                .where(e.id == endpoint_id, e.tenant == tenant)
                                .values(**values, updated_at=now))
            return done.rowcount == 1

    def delete_endpoint(self, endpoint_id: str, *, tenant: str) -> bool:
        e, d = webhook_endpoints.c, webhook_deliveries.c
        with begin_write(self._engine) as conn:
            conn.execute(delete(webhook_deliveries).where(d.endpoint_id == endpoint_id,
                                                          d.tenant == tenant))
            done = conn.execute(delete(webhook_endpoints)
                                .where(e.id == endpoint_id, e.tenant == tenant))
            return done.rowcount == 1

    # deliveries

    def list_deliveries(self, endpoint_id: str, *, limit: int) -> list[WebhookDelivery]:
        """The endpoint's latest deliveries, newest first."""
        d = webhook_deliveries.c
        with begin_read(self._engine, one_snapshot=False) as conn:
            rows = conn.execute(select(webhook_deliveries).where(d.endpoint_id == endpoint_id)
                                .order_by(d.created_at.desc(), d.seq.desc(), d.id).limit(limit))
            return [record_from_row(WebhookDelivery, row) for row in rows]

    def load_delivery(self, delivery_id: str) -> WebhookDelivery | None:
        d = webhook_deliveries.c
        with begin_read(self._engine, one_snapshot=False) as conn:
            row = conn.execute(select(webhook_deliveries).where(d.id == delivery_id)).first()
        return None if row is None else record_from_row(WebhookDelivery, row)

    def claim_due_deliveries(
        self, *, now: datetime, lease_s: float, per_tenant: int, limit: int
    ) -> list[WebhookDelivery]:
        """Take the deliveries that are due (or whose lease ran out: a worker died sending),
        each tenant at most `per_tenant` in flight, oldest first; one attempt counted each.

        Careful: each claim is a conditional update, so two relays never take one row.
        """
        d, e = webhook_deliveries.c, webhook_endpoints.c
        lease = now + timedelta(seconds=lease_s)
        due = or_(and_(d.status == "pending", d.next_attempt_at <= now),
                  and_(d.status == "delivering", d.lease_until < now))
        claimed: list[WebhookDelivery] = []
        with begin_write(self._engine) as conn:
            in_flight: dict[str, int] = dict(conn.execute(
                select(d.tenant, func.count()).where(d.status == "delivering",
                                                     d.lease_until >= now).group_by(d.tenant)
            ).all())
            rows = conn.execute(
                select(d.id, d.tenant, d.attempts)
                .join(webhook_endpoints, e.id == d.endpoint_id)
                .where(due, e.enabled.is_(True))
                .order_by(d.next_attempt_at, d.conversation_id, d.seq).limit(limit)
            ).all()
            for row_id, tenant, attempts in rows:
                if in_flight.get(tenant, 0) >= per_tenant:
                    continue
                took = conn.execute(
                    update(webhook_deliveries).where(d.id == row_id, d.attempts == attempts, due)
                    .values(status="delivering", lease_until=lease, attempts=attempts + 1)
                ).rowcount
                if took:
                    in_flight[tenant] = in_flight.get(tenant, 0) + 1
                    claimed.append(row_id)
            found = conn.execute(select(webhook_deliveries).where(d.id.in_(claimed))
                                 .order_by(d.conversation_id, d.seq, d.id)).all()
        return [record_from_row(WebhookDelivery, row) for row in found]

    def finish_delivery(
        self, delivery: WebhookDelivery, *, status: str, status_code: int | None,
        outcome: str, now: datetime, next_attempt_at: datetime | None,
    ) -> bool:
        """Record an attempt: `delivered`, `failed` for good, or `pending` again at
        `next_attempt_at`; only the claim that made the attempt may (False otherwise)."""
        d = webhook_deliveries.c
        entry = {"attempt": delivery.attempts, "at": now.isoformat(), "status_code": status_code,
                 "outcome": outcome}
        values: dict[str, Any] = {
            "status": status, "last_status_code": status_code, "lease_until": None,
            "attempt_log": (list(delivery.attempt_log) + [entry])[-ATTEMPT_LOG_KEEP:],
        }
        if status == "delivered":
            values["delivered_at"] = now
        if next_attempt_at is not None:
            values["next_attempt_at"] = next_attempt_at
        with begin_write(self._engine) as conn:
            done = conn.execute(
                update(webhook_deliveries).where(
                    d.id == delivery.id, d.status == "delivering",
                    d.attempts == delivery.attempts,
                ).values(**values)
            ).rowcount
            return done == 1

    def list_turn_events(self, conversation_id: str, *, through_seq: int) -> list[Event]:
        """The events of the turn that holds `through_seq`, from its user_msg to that seq."""
        ev = events.c
        with begin_read(self._engine) as conn:
            start = conn.execute(select(func.max(ev.seq)).where(
                ev.conversation_id == conversation_id, ev.type == "user_msg",
                ev.seq <= through_seq)).scalar() or 1
            return list_events_txn(conn, conversation_id, after_seq=start - 1,
                                   before_seq=through_seq + 1, limit=None)

    def count_deliveries(self) -> dict[str, int]:
        """Deliveries by status, for /metrics."""
        d = webhook_deliveries.c
        with begin_read(self._engine, one_snapshot=False) as conn:
            return dict(conn.execute(select(d.status, func.count()).group_by(d.status)).all())

