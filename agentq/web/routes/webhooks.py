"""/v1/webhooks: a tenant's webhook endpoints, their secrets (shown once) and their deliveries.

A URL is the tenant's input: agentq.webhooks.addresses checks it here and again, on the
address connected to, at every send. A secret is in an answer only when it is made
(create, rotate). A delivery lists our outcome and the receiver's status code, never what
the receiver answered.
"""
from __future__ import annotations

from flask import Blueprint, g

from agentq.api.webhooks import (
    Attempt,
    ChangeWebhook,
    CreateWebhook,
    DeliveryList,
    DeliveryOut,
    ListDeliveries,
    RotateSecret,
    WebhookList,
    WebhookOut,
    WebhookWithSecret,
)
from agentq.core.timefmt import format_ts
from agentq.store.webhooks import WebhookDelivery, WebhookEndpoint
from agentq.web import present
from agentq.web.errors import ApiError
from agentq.web.operation import operation
from agentq.web.services import services
from agentq.webhooks.endpoints import WebhookEndpoints

bp = Blueprint("webhooks", __name__, url_prefix="/v1/webhooks")

@bp.post("")
@operation("Register a webhook endpoint; its signing secret is shown only in this answer",
           body=CreateWebhook, answers={201: WebhookWithSecret}, errors=(409, 503))
def create(body: CreateWebhook):
    endpoint, secret = _endpoints().create(g.scope.tenant, url=body.url,
                                           event_types=body.event_types)
    return present.dump(WebhookWithSecret(**_out(endpoint).model_dump(), secret=secret)), 201


@bp.get("")
@operation("List your webhook endpoints", answers={200: WebhookList}, errors=(503,))
def listing():
    return present.dump(WebhookList(webhooks=[_out(e) for e in _endpoints().list_for(g.scope.tenant)]))


@bp.get("/<id:webhook_id>")
@operation("One webhook endpoint", answers={200: WebhookOut}, errors=(503,))
def one(webhook_id: str):
    return present.dump(_out(_endpoints().get(g.scope.tenant, webhook_id)))


@bp.patch("/<id:webhook_id>")
@operation("Change an endpoint's URL or event types, or disable / enable it",
           body=ChangeWebhook, answers={200: WebhookOut}, errors=(503,))
def change(webhook_id: str, body: ChangeWebhook):
    endpoint = _endpoints().change(g.scope.tenant, webhook_id, url=body.url,
                                   event_types=body.event_types, enabled=body.enabled)
    return present.dump(_out(endpoint))


@bp.post("/<id:webhook_id>/rotate")
@operation("A new signing secret (shown once); the old one signs too for grace_s seconds",
           body=RotateSecret, answers={200: WebhookWithSecret}, errors=(503,))
def rotate(webhook_id: str, body: RotateSecret):
    endpoint, secret = _endpoints().rotate(g.scope.tenant, webhook_id, grace_s=body.grace_s)
    return present.dump(WebhookWithSecret(**_out(endpoint).model_dump(), secret=secret))


@bp.delete("/<id:webhook_id>")
@operation("Remove an endpoint and its deliveries", answers={204: None}, errors=(503,))
def remove(webhook_id: str):
    _endpoints().delete(g.scope.tenant, webhook_id)
    return "", 204


@bp.get("/<id:webhook_id>/deliveries")
@operation("The endpoint's latest deliveries, newest first, with each attempt's status code",
           query=ListDeliveries, answers={200: DeliveryList}, errors=(503,))
def deliveries(webhook_id: str, query: ListDeliveries):
    endpoint = _endpoints().get(g.scope.tenant, webhook_id)
    found = services().store.webhooks.list_deliveries(endpoint.id, limit=query.limit)
    return present.dump(DeliveryList(deliveries=[_delivery(d) for d in found]))


def _endpoints() -> WebhookEndpoints:
    endpoints = services().webhooks
    if endpoints is None:
        raise ApiError(503, "webhooks_unavailable",
                       "this deployment has no webhooks: their secrets are sealed with "
                       "AGENTQ_ENCRYPTION_KEYS, which the operator has not set (`agentq "
                       "tenant-keys new-encryption-key` makes a key)",
                       details={"settings": ["AGENTQ_ENCRYPTION_KEYS"]})
    return endpoints


def _ts(value) -> str | None:
    return None if value is None else format_ts(value)


def _out(endpoint: WebhookEndpoint) -> WebhookOut:
    return WebhookOut(
        id=endpoint.id, url=endpoint.url, event_types=list(endpoint.event_types),
        enabled=endpoint.enabled, disabled_reason=endpoint.disabled_reason,
        failing_since=_ts(endpoint.failing_since),
        previous_secret_until=_ts(endpoint.previous_until) if endpoint.previous_sealed else None,
        created_at=format_ts(endpoint.created_at), updated_at=format_ts(endpoint.updated_at),
    )


def _delivery(delivery: WebhookDelivery) -> DeliveryOut:
    pending = delivery.status in ("pending", "delivering")
    return DeliveryOut(
        webhook_id=delivery.id, event_type=delivery.event_type,
        conversation_id=delivery.conversation_id, seq=delivery.seq, status=delivery.status,
        attempts=delivery.attempts, last_status_code=delivery.last_status_code,
        next_attempt_at=_ts(delivery.next_attempt_at) if pending else None,
        delivered_at=_ts(delivery.delivered_at), created_at=format_ts(delivery.created_at),
        attempt_log=[Attempt(**entry) for entry in delivery.attempt_log],
    )
