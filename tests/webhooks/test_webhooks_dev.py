"""Webhooks in `agentq dev`: one gevent process whose resolver runs in a thread of its own,
where a failure the caller handles is still printed, so what reaches the resolver matters."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from agentq.store import Store
from agentq.tenancy.keybox import new_encryption_key
from tests.support.dev import WAIT_S, Dev
from tests.support.processes import wait_for

pytestmark = pytest.mark.slow  # starts agentq dev


@pytest.fixture
def dev(tmp_path):
    process = Dev(tmp_path, AGENTQ_ENCRYPTION_KEYS=new_encryption_key(), AGENTQ_WEBHOOK_POLL_S="0.2")
    yield process
    process.stop()


def test_a_stored_url_whose_host_dns_cannot_hold_never_reaches_the_resolver_nor_prints_a_traceback(
        dev, tmp_path):
    dev.wait_banner()
    with dev.client() as api:
        hook = api.post("/v1/webhooks", json={"url": "https://hooks.example.com/h",
                                              "event_types": ["turn.completed"]}).json()
        store = Store.open(f"sqlite:///{tmp_path / 'agentq.db'}")
        try:  # as a URL registered before host names were checked was stored
            store.webhooks.update_endpoint(hook["id"], tenant="dev", now=datetime.now(timezone.utc),
                                           url=f"https://{'a' * 64}.example.com/h")
        finally:
            store.dispose()
        cid = api.post("/v1/conversations", json={}).json()["id"]
        assert api.post(f"/v1/conversations/{cid}/messages", json={"content": "hi"}).status_code == 202

        def attempted() -> list | None:
            deliveries = api.get(f"/v1/webhooks/{hook['id']}/deliveries").json()["deliveries"]
            return deliveries and deliveries[0]["attempt_log"]
        log = wait_for(attempted, timeout_s=WAIT_S, what=lambda: f"an attempt; output:\n{dev.text()}")
    assert [entry["outcome"] for entry in log] == ["url_refused"]
    assert "Traceback" not in dev.text() and "UnicodeError" not in dev.text(), dev.text()
