"""Moving the outbox: the relay takes what is due, a worker sends each delivery once per claim.

At least once: a delivery is claimed with a lease before it is sent, and a worker that dies
while sending leaves it to be taken again when the lease runs out, with the same
`webhook-id`. A failed attempt is retried on the Standard Webhooks schedule (about a day);
an endpoint that has failed for `disable_after_s` is disabled, which its tenant sees on
the endpoint (`disabled_reason`). Each tenant has at most `max_in_flight` deliveries
being sent, so one tenant's slow receiver cannot hold every webhook worker.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from agentq.errors import InvalidInput
from agentq.store import Store
from agentq.store.webhooks import WebhookDelivery, WebhookEndpoint
from agentq.tenancy.keybox import KeyBoxError
from agentq.tools import Registry
from agentq.webhooks.addresses import check_url
from agentq.webhooks.endpoints import WebhookEndpoints
from agentq.webhooks.payloads import belongs_to, payload, title_of
from agentq.webhooks.sender import Answer, send

log = logging.getLogger(__name__)
RELAY_BATCH = 200


class Deliveries:
    """The relay and the sender of one process, over its store and the tenants' endpoints."""

    def __init__(self, store: Store, endpoints: WebhookEndpoints, registry: Registry,
                 clock: Callable[[], datetime]) -> None:
        self.store, self.endpoints, self.registry, self.clock = store, endpoints, registry, clock
        self.policy = endpoints.policy

    def relay(self) -> list[WebhookDelivery]:
        """Claim what is due (new, retries, and those a dead worker held); send each."""
        return self.store.webhooks.claim_due_deliveries(
            now=self.clock(), lease_s=self.policy.lease_s,
            per_tenant=self.policy.max_in_flight, limit=RELAY_BATCH,
        )

    def deliver(self, delivery_id: str, attempt: int) -> Answer | None:
        """Make attempt `attempt` of a claimed delivery and record it; None if it is not
        (or no longer) that attempt's to make."""
        delivery = self.store.webhooks.load_delivery(delivery_id)
        if delivery is None or delivery.status != "delivering" or delivery.attempts != attempt:
            return None
        endpoint = self.store.webhooks.load_endpoint(delivery.endpoint_id)
        if endpoint is None or not endpoint.enabled:
            self._record(delivery, endpoint, Answer(None, "endpoint_disabled"), final=True)
            return None
        now = self.clock()
        try:
            secrets = self.endpoints.signing_secrets(endpoint, now)
        except KeyBoxError:
            log.error("webhook secret of endpoint %s cannot be opened", endpoint.id)
            self._record(delivery, endpoint, Answer(None, "secret_unreadable"))
            return None
        try:  # the operator's rules may have narrowed since the URL was registered
            target = check_url(endpoint.url, self.policy)
        except InvalidInput:
            self._record(delivery, endpoint, Answer(None, "url_refused"), final=True)
            return None
        body = json.dumps(self._payload(delivery), separators=(",", ":"), ensure_ascii=False)
        answer = send(target, body=body, webhook_id=delivery.id, at=now, secrets=secrets,
                      policy=self.policy)
        self._record(delivery, endpoint, answer)
        return answer

    def _payload(self, delivery: WebhookDelivery) -> dict:
        turn = self.store.webhooks.list_turn_events(delivery.conversation_id, through_seq=delivery.seq)
        first = self.store.log.list_events(delivery.conversation_id, after_seq=0, limit=1)
        title = title_of(first[0].content.get("text")) if first and first[0].type == "user_msg" \
            else None
        info = self.store.conversations.load(delivery.conversation_id)
        return payload(delivery.event_type, conversation_id=delivery.conversation_id,
                       seq=delivery.seq, ref=delivery.ref, turn=turn, title=title,
                       describe=self._describe, belongs=belongs_to(info))

    def _describe(self, name: str) -> str | None:
        tool = self.registry.get(name)
        return tool.description if tool is not None else None

    def _record(self, delivery: WebhookDelivery, endpoint: WebhookEndpoint | None,
                answer: Answer, *, final: bool = False) -> None:
        """The attempt's outcome on the delivery, and on the endpoint's failure record."""
        now = self.clock()
        if answer.delivered:
            self.store.webhooks.finish_delivery(delivery, status="delivered", status_code=answer.status_code,
                                                outcome=answer.outcome, now=now, next_attempt_at=None)
            if endpoint is not None and endpoint.failing_since is not None:
                self.store.webhooks.update_endpoint(endpoint.id, tenant=endpoint.tenant, now=now,
                                                    failing_since=None)
            return
        delays = self.policy.retry_delays_s
        retry = not final and delivery.attempts <= len(delays)
        self.store.webhooks.finish_delivery(
            delivery, status="pending" if retry else "failed", status_code=answer.status_code,
            outcome=answer.outcome, now=now,
            next_attempt_at=now + timedelta(seconds=delays[delivery.attempts - 1]) if retry else None,
        )
        log.info("webhook %s attempt %d: %s", delivery.id, delivery.attempts, answer.outcome)
        if endpoint is not None and endpoint.enabled:
            self._note_failure(endpoint, now)

    def _note_failure(self, endpoint: WebhookEndpoint, now: datetime) -> None:
        """Start the endpoint's failure record, or disable it once it is a day old."""
        if endpoint.failing_since is None:
            self.store.webhooks.update_endpoint(endpoint.id, tenant=endpoint.tenant, now=now,
                                                failing_since=now)
        elif now - endpoint.failing_since >= timedelta(seconds=self.policy.disable_after_s):
            reason = (f"disabled by agentq: every delivery failed since "
                      f"{endpoint.failing_since.isoformat()}")
            self.store.webhooks.update_endpoint(endpoint.id, tenant=endpoint.tenant, now=now,
                                                enabled=False, disabled_reason=reason)
            log.warning("webhook endpoint %s of tenant %s disabled after a day of failures",
                        endpoint.id, endpoint.tenant)
