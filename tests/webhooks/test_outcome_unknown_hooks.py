"""`call.waiting` for a `once` call whose run was found started and unfinished: the
receiver reads `kind: outcome_unknown` and what a person needs to answer it."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest
from standardwebhooks import Webhook

from agentq.commands import Commands
from agentq.config import Config
from agentq.core.scope import Scope
from agentq.runtime import Runtime
from agentq.tenancy.keybox import KeyBox, new_encryption_key
from agentq.tools import Registry
from agentq.webhooks.delivery import Deliveries
from agentq.webhooks.endpoints import WebhookEndpoints
from agentq.webhooks.policy import WebhookPolicy
from tests.support.clock import Clock
from tests.support.drive import Recorder, drain
from tests.support.once_runs import DEAD, started_and_died, until_tool
from tests.support.receiver import Receiver

ALICE = Scope(tenant="t1", user="alice")
PAY = [{"text": "Paying the order.", "tool_calls": [
    {"name": "pay", "args": {"order": "A-17", "amount": 12.5, "seconds": 0}}]},
    {"text": "Done."}]


@pytest.fixture
def clock():
    return Clock(datetime.now(timezone.utc))  # receivers check the timestamp against now


def test_a_once_call_found_unfinished_is_a_call_waiting_of_kind_outcome_unknown(store, clock):
    registry = Registry.from_modules(["tests.support.tools_for_tests"])
    runtime = Runtime(store=store, registry=registry, pubsub=Recorder(),
                      config=Config(lease_s=30.0), clock=clock, sleep=lambda s: None)
    commands = Commands(store, registry, clock=clock)
    endpoints = WebhookEndpoints(store.webhooks, KeyBox([new_encryption_key()]),
                                 WebhookPolicy(allow_http=True, allow_loopback=True), clock)
    deliveries = Deliveries(store, endpoints, registry, clock)
    with Receiver() as receiver:
        _, secret = endpoints.create("t1", url=receiver.url, event_types=["call.waiting"])
        conv = commands.create_conversation(ALICE, {"script": PAY})
        runs = until_tool(runtime, commands.post_message(conv.id, "pay order A-17", ALICE)[1])
        call_id = started_and_died(store, clock, conv.id, runs)
        drain(runtime, runs)
        while claimed := deliveries.relay():
            for item in claimed:
                deliveries.deliver(item.id, item.attempts)
        [sent] = [Webhook(secret).verify(r.body, r.headers) for r in receiver.requests]
    call = sent["data"]["call"]
    assert sent["type"] == "call.waiting" and call["tool_call_id"] == call_id
    assert call["kind"] == "outcome_unknown" and call["executor"] == "server"
    assert call["args"] == {"order": "A-17", "amount": 12.5, "seconds": 0}
    found = call["outcome_unknown"]
    assert found["worker"] == DEAD and found["ran_s"] == 7.0 and found["run"] == 0
    assert found["started_at"] and found["found_at"]
    assert call["description"] == registry.get("pay").description
    assert sent["data"]["context"]["assistant_text"] == "Paying the order."
