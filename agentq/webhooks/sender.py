"""One webhook request: signed per Standard Webhooks, sent to the address that was checked.

The name is resolved and checked here (agentq.webhooks.addresses), then the connection
goes to that very address, with the name kept for the Host header and for TLS (SNI and the
certificate check), so a second lookup cannot send it elsewhere. Redirects are not
followed, proxies from the environment are not used, and the receiver's answer is read
only for its status code: the body is never kept, logged or shown to the tenant.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import httpx2
from standardwebhooks import Webhook

from agentq.webhooks.addresses import AddressRefused, Target, resolve
from agentq.webhooks.policy import WebhookPolicy

log = logging.getLogger(__name__)
USER_AGENT = "agentq-webhooks/1"


@dataclass(frozen=True)
class Answer:
    """What came of one attempt: the receiver's status code, if it answered, and our word."""

    status_code: int | None
    outcome: str  # delivered, http_error, redirect, timeout, connect_error, address_refused

    @property
    def delivered(self) -> bool:
        return self.outcome == "delivered"


def signature(secrets: Sequence[str], webhook_id: str, at: datetime, body: str) -> str:
    """`webhook-signature`: one `v1,<sig>` per secret (the new one, and the old during a
    rotation's grace period), space-separated as the specification allows."""
    return " ".join(Webhook(secret).sign(webhook_id, at, body) for secret in secrets)


def send(
    target: Target, *, body: str, webhook_id: str, at: datetime, secrets: Sequence[str],
    policy: WebhookPolicy,
) -> Answer:
    """POST `body` once; never raises for what the network or the receiver does."""
    try:
        address = resolve(target, policy)
    except AddressRefused as exc:
        log.warning("webhook not sent: %s", exc)
        return Answer(None, "address_refused")
    headers = {
        "host": target.host_header,
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "webhook-id": webhook_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signature(secrets, webhook_id, at, body),
    }
    shown = f"[{address}]" if address.version == 6 else str(address)
    url = f"{target.scheme}://{shown}:{target.port}{target.path}"
    timeout = httpx2.Timeout(policy.timeout_s)
    try:
        with httpx2.Client(timeout=timeout, follow_redirects=False, trust_env=False) as client:
            request = client.build_request("POST", url, content=body.encode("utf-8"),
                                           headers=headers,
                                           extensions={"sni_hostname": target.host})
            response = client.send(request, stream=True)
            response.close()  # the status is all we keep; the body is never read
    except httpx2.TimeoutException:
        return Answer(None, "timeout")
    except httpx2.HTTPError:
        return Answer(None, "connect_error")
    code = response.status_code
    if 200 <= code < 300:
        return Answer(code, "delivered")
    return Answer(code, "redirect" if 300 <= code < 400 else "http_error")
