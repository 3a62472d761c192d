"""What a tenant may do to its webhook endpoints: register, list, change, rotate, remove.

A signing secret is made here, shown once, and stored only sealed (agentq.tenancy.keybox), bound
to its endpoint's row: a sealed secret copied to another row does not open. Rotating keeps
the old secret signing beside the new one for a grace period, so receivers can switch.
"""
from __future__ import annotations

import base64
import secrets
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from agentq.core.occurrences import EVENT_TYPES, MAX_GRACE_S
from agentq.errors import Conflict, InvalidInput, NotFound
from agentq.store.webhooks import WebhookEndpoint, Webhooks
from agentq.tenancy.keybox import KeyBox
from agentq.webhooks.addresses import check_url
from agentq.webhooks.policy import WebhookPolicy

SECRET_BYTES = 24


def new_secret() -> str:
    """A Standard Webhooks secret: `whsec_` and base64 of random bytes."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def _bound_to(endpoint_id: str) -> str:
    """What a sealed secret names besides its tenant: its endpoint's row."""
    return f"webhook:{endpoint_id}"


class WebhookEndpoints:
    """A tenant's endpoints; every verb takes the tenant, and another's endpoint is NotFound."""

    def __init__(self, webhooks: Webhooks, keybox: KeyBox, policy: WebhookPolicy,
                 clock: Callable[[], datetime]) -> None:
        self.webhooks, self.keybox, self.policy, self.clock = webhooks, keybox, policy, clock

    def create(self, tenant: str, *, url: str, event_types: Sequence[str]
               ) -> tuple[WebhookEndpoint, str]:
        """A new enabled endpoint, and its secret: the only time it is shown."""
        check_url(url, self.policy)
        types = _event_types(event_types)
        endpoint_id = "whe_" + uuid.uuid4().hex
        secret = new_secret()
        now = self.clock()
        endpoint = WebhookEndpoint(
            id=endpoint_id, tenant=tenant, url=url, event_types=types,
            sealed_secret=self.keybox.seal(tenant, _bound_to(endpoint_id), secret),
            previous_sealed=None, previous_until=None, enabled=True, disabled_reason=None,
            failing_since=None, created_at=now, updated_at=now,
        )
        if not self.webhooks.add_endpoint(endpoint, max_per_tenant=self.policy.max_endpoints):
            raise Conflict(f"a tenant may have at most {self.policy.max_endpoints} webhook endpoints",
                           code="too_many_endpoints")
        return endpoint, secret

    def list_for(self, tenant: str) -> list[WebhookEndpoint]:
        return self.webhooks.list_endpoints(tenant)

    def get(self, tenant: str, endpoint_id: str) -> WebhookEndpoint:
        found = self.webhooks.load_endpoint(endpoint_id, tenant=tenant)
        if found is None:
            raise NotFound(f"no webhook endpoint {endpoint_id}")
        return found

    def change(self, tenant: str, endpoint_id: str, *, url: str | None = None,
               event_types: Sequence[str] | None = None, enabled: bool | None = None
               ) -> WebhookEndpoint:
        """Change what is given; enabling again clears the failure record."""
        self.get(tenant, endpoint_id)
        values: dict[str, object] = {}
        if url is not None:
            check_url(url, self.policy)
            values["url"] = url
        if event_types is not None:
            values["event_types"] = _event_types(event_types)
        if enabled is not None:
            values["enabled"] = enabled
            if enabled:
                values.update(disabled_reason=None, failing_since=None)
            else:
                values["disabled_reason"] = "disabled by the tenant"
        if values:
            self.webhooks.update_endpoint(endpoint_id, tenant=tenant, now=self.clock(),
                                                **values)
        return self.get(tenant, endpoint_id)

    def rotate(self, tenant: str, endpoint_id: str, *, grace_s: float) -> tuple[WebhookEndpoint, str]:
        """A new secret (shown once); the old one keeps signing for `grace_s` seconds."""
        if not 0 <= grace_s <= MAX_GRACE_S:
            raise InvalidInput(f"grace_s must be between 0 and {MAX_GRACE_S:g}")
        current = self.get(tenant, endpoint_id)
        secret = new_secret()
        now = self.clock()
        self.webhooks.update_endpoint(
            endpoint_id, tenant=tenant, now=now,
            sealed_secret=self.keybox.seal(tenant, _bound_to(endpoint_id), secret),
            previous_sealed=current.sealed_secret if grace_s > 0 else None,
            previous_until=now + timedelta(seconds=grace_s) if grace_s > 0 else None,
        )
        return self.get(tenant, endpoint_id), secret

    def delete(self, tenant: str, endpoint_id: str) -> None:
        if not self.webhooks.delete_endpoint(endpoint_id, tenant=tenant):
            raise NotFound(f"no webhook endpoint {endpoint_id}")

    def signing_secrets(self, endpoint: WebhookEndpoint, now: datetime) -> list[str]:
        """The secrets that sign now: the current one, and the previous during its grace."""
        bound = _bound_to(endpoint.id)
        opened = [self.keybox.open(endpoint.sealed_secret, endpoint.tenant, bound)]
        if endpoint.previous_sealed and endpoint.previous_until and endpoint.previous_until > now:
            opened.append(self.keybox.open(endpoint.previous_sealed, endpoint.tenant, bound))
        return opened


def _event_types(event_types: Sequence[str]) -> list[str]:
    unknown = sorted(set(event_types) - set(EVENT_TYPES))
    if unknown or not event_types:
        raise InvalidInput(f"event_types must name some of {', '.join(EVENT_TYPES)}"
                           + (f"; unknown: {', '.join(unknown)}" if unknown else ""))
    return [t for t in EVENT_TYPES if t in event_types]
