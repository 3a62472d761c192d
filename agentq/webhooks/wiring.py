"""The tenants' endpoints of a process, from its Config: None without an encryption key."""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from agentq.config import Config
from agentq.store import Store
from agentq.tenancy.keybox import KeyBox
from agentq.webhooks.endpoints import WebhookEndpoints
from agentq.webhooks.policy import WebhookPolicy


def webhook_endpoints(config: Config, store: Store, clock: Callable[[], datetime]
                      ) -> WebhookEndpoints | None:
    """Secrets are stored only sealed: with no AGENTQ_ENCRYPTION_KEYS there are no webhooks."""
    keybox = KeyBox.from_setting(config.encryption_keys)
    if keybox is None:
        return None
    return WebhookEndpoints(store.webhooks, keybox, WebhookPolicy.from_config(config), clock)
