"""The operator's rules for webhooks, from Config: which addresses, how many, how long."""
from __future__ import annotations

from dataclasses import dataclass

from agentq.config import Config

# The operator's settings that widen where a webhook may go, named in each refusal they would
# lift (agentq.config reads them into Config.webhook_allow_http / webhook_allow_loopback).
ALLOW_HTTP = "AGENTQ_WEBHOOK_ALLOW_HTTP"
ALLOW_LOOPBACK = "AGENTQ_WEBHOOK_ALLOW_LOOPBACK"

# Standard Webhooks' schedule: the delay before each retry; the last ends about a day on.
RETRY_DELAYS_S: tuple[float, ...] = (5, 300, 1800, 7200, 18000, 36000, 36000)


@dataclass(frozen=True)
class WebhookPolicy:
    """`allow_http` and `allow_loopback` are the operator's (tests, a private deployment);
    a tenant can never widen them."""

    allow_http: bool = False
    allow_loopback: bool = False
    max_endpoints: int = 10  # per tenant
    max_in_flight: int = 4  # deliveries of one tenant being sent at once
    timeout_s: float = 10.0
    lease_s: float = 60.0  # a delivery whose worker died is sent again after this
    disable_after_s: float = 86_400.0  # an endpoint failing this long is disabled
    retry_delays_s: tuple[float, ...] = RETRY_DELAYS_S

    @classmethod
    def from_config(cls, config: Config) -> WebhookPolicy:
        return cls(
            allow_http=config.webhook_allow_http, allow_loopback=config.webhook_allow_loopback,
            max_endpoints=config.webhook_max_endpoints, max_in_flight=config.webhook_in_flight,
            timeout_s=config.webhook_timeout_s, lease_s=config.webhook_lease_s,
            disable_after_s=config.webhook_disable_after_s,
        )
