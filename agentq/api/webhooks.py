"""The shapes of /v1/webhooks: a tenant's endpoints, their secrets and their deliveries."""
from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from agentq.api.common import SPACE
from agentq.core.occurrences import EVENT_TYPES, MAX_GRACE_S


class _WebhookBody(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


WebhookEventType = Literal["call.waiting", "call.resolved", "call.expired", "turn.completed",
                    "turn.failed", "budget.exceeded"]
assert set(get_args(WebhookEventType)) == set(EVENT_TYPES)  # one list of names, checked at import
# http(s), a host without a user or password, no fragment; what the operator allows and
# where the host is are checked beyond it (agentq.webhooks.addresses: 422 url_refused).
Url = Annotated[str, StringConstraints(
    min_length=10, max_length=2048, pattern=f"^https?://[^{SPACE}/?#@]+([/?][^{SPACE}#]*)?$")]
EventTypes = Annotated[list[WebhookEventType], Field(min_length=1, max_length=len(EVENT_TYPES))]


class CreateWebhook(_WebhookBody):
    """An endpoint: https (http only where the operator allows it), on a public address."""

    url: Url
    event_types: EventTypes


class ChangeWebhook(_WebhookBody):
    url: Url | None = None
    event_types: EventTypes | None = None
    enabled: bool | None = None


class RotateSecret(_WebhookBody):
    grace_s: float = Field(86_400.0, ge=0, le=MAX_GRACE_S,
                           description="how long the old secret keeps signing beside the new one")


class ListDeliveries(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    limit: int = Field(50, ge=1, le=200)


class WebhookOut(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    url: str
    event_types: list[str]
    enabled: bool
    disabled_reason: str | None
    failing_since: str | None
    previous_secret_until: str | None
    created_at: str
    updated_at: str


class WebhookWithSecret(WebhookOut):
    secret: str = Field(description="shown only now: verify deliveries with it")


class WebhookList(BaseModel):
    model_config = ConfigDict(frozen=True)

    webhooks: list[WebhookOut]


class Attempt(BaseModel):
    model_config = ConfigDict(frozen=True)

    attempt: int
    at: str
    status_code: int | None
    outcome: str


class DeliveryOut(BaseModel):
    model_config = ConfigDict(frozen=True)

    webhook_id: str
    event_type: str
    conversation_id: str
    seq: int
    status: str
    attempts: int
    last_status_code: int | None
    next_attempt_at: str | None
    delivered_at: str | None
    created_at: str
    attempt_log: list[Attempt]


class DeliveryList(BaseModel):
    model_config = ConfigDict(frozen=True)

    deliveries: list[DeliveryOut]
