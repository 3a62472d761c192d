"""Webhooks with real worker and beat processes on Redis and Postgres: every event of a turn
with an approval reaches a real receiver, signed, at least once, also when the worker is
killed while its delivery is in flight and the broker is flushed."""
from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest
import redis
from standardwebhooks import Webhook

from agentq.tenancy.keybox import KeyBox, new_encryption_key
from agentq.core.scope import Scope
from agentq.webhooks.endpoints import WebhookEndpoints
from agentq.webhooks.policy import WebhookPolicy
from agentq.worker.tasks import enqueue
from tests.support.processes import wait_for
from tests.support.receiver import Receiver

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

ALICE = Scope(tenant="t1", user="alice")
PERSON = Scope(tenant="t1", user="bob")
ALL = ["call.waiting", "call.resolved", "call.expired", "turn.completed", "turn.failed"]
REFUND = [
    {"text": "Refunding.",
     "tool_calls": [{"name": "issue_refund", "args": {"order": "A-17", "amount": 1299.0}}]},
    {"text": "Done."},
]


def kinds(receiver, secret):
    return [Webhook(secret).verify(r.body, r.headers)["type"] for r in receiver.requests]


def test_every_event_of_an_approved_turn_arrives_signed_across_a_worker_killed_mid_delivery(
    pg_store_clean, commands, broker, workers, beat, redis_url, tmp_path
):
    store = pg_store_clean
    key = new_encryption_key()
    env = {"AGENTQ_ENCRYPTION_KEYS": key, "AGENTQ_WEBHOOK_ALLOW_HTTP": "1",
           "AGENTQ_WEBHOOK_ALLOW_LOOPBACK": "1", "AGENTQ_WEBHOOK_POLL_S": "0.5",
           "AGENTQ_WEBHOOK_LEASE_S": "3"}
    endpoints = WebhookEndpoints(store.webhooks, KeyBox([key]),
                                 WebhookPolicy(allow_http=True, allow_loopback=True),
                                 lambda: datetime.now(timezone.utc))
    with Receiver(hold_s=30) as receiver:  # the first delivery hangs: its worker dies meanwhile
        _, secret = endpoints.create("t1", url=receiver.url, event_types=ALL)
        conv = commands.create_conversation(ALICE, {"script": REFUND})
        enqueue(broker, commands.post_message(conv.id, "refund A-17", ALICE)[1])
        first = workers("w1", **env)
        beat(**env)
        wait_for(lambda: receiver.requests, what="the first delivery to be in flight")
        first.kill()
        client = redis.Redis.from_url(redis_url)
        client.flushdb()  # the deliver tasks and any relay in the broker are gone too
        client.set("agentq:test-claim", "flushed", ex=7200)  # keep this db claimed for the run
        client.close()
        workers("w2", **env)
        wait_for(lambda: len(receiver.requests) >= 2, what="the delivery to be sent again")
        (call_id,) = store.conversations.load(conv.id).fsm.pending
        enqueue(broker, commands.resolve(conv.id, call_id, PERSON, status="approved",
                                         result=None)[1])
        wait_for(lambda: {"call.resolved", "turn.completed"} <= set(kinds(receiver, secret)),
                 what="the rest of the turn's events")
        seen = kinds(receiver, secret)
    assert seen[:2] == ["call.waiting", "call.waiting"]
    first_id, again_id = (r.headers["webhook-id"] for r in receiver.requests[:2])
    assert first_id == again_id  # the same delivery, which a receiver de-duplicates by
    assert set(seen) == {"call.waiting", "call.resolved", "turn.completed"}
    by_id = {r.headers["webhook-id"] for r in receiver.requests}
    assert len(by_id) == 3  # one delivery per event, each at least once
