"""Webhook deliveries on a real store (SQLite and Postgres) to a real HTTP receiver: the outbox,
the relay and the sender run in-process, every delivery verified with `standardwebhooks`."""
from __future__ import annotations

import json
import logging
import socket
from datetime import datetime, timedelta, timezone

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from agentq.commands import Commands
from agentq.config import Config
from agentq.core.agents import AgentDefinition
from agentq.core.settings import Settings
from agentq.tenancy.keybox import KeyBox, KeyBoxError, new_encryption_key
from agentq.runtime import Runtime
from agentq.tools import Registry
from agentq.core.scope import Scope
from agentq.webhooks.delivery import Deliveries
from agentq.webhooks.endpoints import WebhookEndpoints
from agentq.webhooks.policy import WebhookPolicy
from tests.support.clock import Clock
from tests.support.drive import Recorder, drain
from tests.support.receiver import Receiver

ALICE = Scope(tenant="t1", user="alice")
PERSON = Scope(tenant="t1", user="bob")
ALL = ["call.waiting", "call.resolved", "call.expired", "turn.completed", "turn.failed"]
REFUND = [
    {"text": "The order is 129.90 EUR; refunding it.",
     "tool_calls": [{"name": "issue_refund", "args": {"order": "A-17", "amount": 1299.0}}]},
    {"text": "Refunded."},
]
TEST_POLICY = WebhookPolicy(allow_http=True, allow_loopback=True)  # the operator's choice


@pytest.fixture
def clock():
    return Clock(datetime.now(timezone.utc))  # receivers check the timestamp against now


@pytest.fixture
def registry():
    return Registry.from_modules(["agentq.tools.demo", "tests.support.tools_for_tests"])


@pytest.fixture
def runtime(store, clock, registry):
    return Runtime(store=store, registry=registry, pubsub=Recorder(), config=Config(lease_s=30.0),
                   clock=clock, sleep=lambda s: None)


@pytest.fixture
def commands(runtime, clock):
    return Commands(runtime.store, runtime.registry, clock=clock)


def hooks(store, registry, clock, policy=TEST_POLICY):
    endpoints = WebhookEndpoints(store.webhooks, KeyBox([new_encryption_key()]), policy, clock)
    return endpoints, Deliveries(store, endpoints, registry, clock)


def flush(deliveries):
    """Relay and send until nothing is due: what beat and the webhook workers do."""
    while claimed := deliveries.relay():
        for item in claimed:
            deliveries.deliver(item.id, item.attempts)


def verified(receiver, secret):
    """Every request the receiver got, checked as a receiver would: signature and timestamp."""
    return [Webhook(secret).verify(r.body, r.headers) for r in receiver.requests]


def start(commands, runtime, script=REFUND):
    conv = commands.create_conversation(ALICE, {"script": script})
    _, follow = commands.post_message(conv.id, "Please refund order A-17", ALICE)
    return conv.id, drain(runtime, follow)


def test_each_event_of_a_turn_with_an_approval_reaches_the_receiver_signed(
    store, registry, clock, runtime, commands
):
    endpoints, deliveries = hooks(store, registry, clock)
    with Receiver() as receiver:
        _, secret = endpoints.create("t1", url=receiver.url, event_types=ALL)
        cid, _ = start(commands, runtime)
        flush(deliveries)
        (call_id,) = store.conversations.load(cid).fsm.pending
        drain(runtime, commands.resolve(cid, call_id, PERSON, status="approved", result=None)[1])
        flush(deliveries)
        sent = verified(receiver, secret)
    assert [p["type"] for p in sent] == ["call.waiting", "call.resolved", "turn.completed"]
    waiting = sent[0]["data"]
    assert waiting["call"] == {
        "tool_call_id": call_id, "name": "issue_refund", "args": {"order": "A-17", "amount": 1299.0},
        "executor": "server", "needs_approval": True,
        "expires_at": store.calls.load(cid, call_id).to_json()["expires_at"],
        "description": registry.get("issue_refund").description,
    }
    assert waiting["context"] == {
        "user_message": "Please refund order A-17", "acting_user": {"tenant": "t1", "user": "alice"},
        "assistant_text": "The order is 129.90 EUR; refunding it.", "earlier_calls": [],
    }
    assert waiting["conversation"] == {"id": cid, "title": "Please refund order A-17"}
    assert sent[1]["data"]["resolution"] == {"status": "approved", "by": "bob"}
    assert sent[2]["data"]["answer"] == {"text": "Refunded."}
    assert [p["data"]["seq"] for p in sent] == sorted(p["data"]["seq"] for p in sent)
    ids = [r.headers["webhook-id"] for r in receiver.requests]
    assert len(set(ids)) == 3


def test_a_failed_attempt_is_retried_later_with_the_same_webhook_id(
    store, registry, clock, runtime, commands
):
    endpoints, deliveries = hooks(store, registry, clock)
    with Receiver(script=[500]) as receiver:
        endpoint, secret = endpoints.create("t1", url=receiver.url, event_types=["call.waiting"])
        start(commands, runtime)
        flush(deliveries)
        assert len(receiver.requests) == 1 and deliveries.relay() == []  # not due yet
        clock.tick(5)
        flush(deliveries)
        verified(receiver, secret)
    first, second = receiver.requests
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    (delivery,) = store.webhooks.list_deliveries(endpoint.id, limit=10)
    assert delivery.status == "delivered"
    assert [a["status_code"] for a in delivery.attempt_log] == [500, 204]
    assert "private answer" not in json.dumps(delivery.attempt_log)  # never the receiver's body


def test_an_unapproved_call_that_expires_and_a_failed_turn_are_told(
    store, registry, clock, runtime, commands
):
    endpoints, deliveries = hooks(store, registry, clock)
    with Receiver() as receiver:
        _, secret = endpoints.create("t1", url=receiver.url,
                                     event_types=["call.expired", "turn.failed"])
        cid, later = start(commands, runtime)
        clock.tick(61)
        drain(runtime, later)
        failing = commands.create_conversation(ALICE, {"script": [
            {"text": "x", "fail": {"status": 400, "times": 1}}]})
        drain(runtime, commands.post_message(failing.id, "go", ALICE)[1])
        flush(deliveries)
        sent = verified(receiver, secret)
    assert sorted(p["type"] for p in sent) == ["call.expired", "turn.failed"]
    expired = next(p for p in sent if p["type"] == "call.expired")["data"]
    assert expired["conversation_id"] == cid and expired["resolution"]["by"] == "system"


def test_a_name_that_resolves_to_a_private_address_at_send_time_is_never_connected_to(
    store, registry, clock, runtime, commands, monkeypatch
):
    policy = WebhookPolicy(allow_http=True, allow_loopback=False)
    endpoints, deliveries = hooks(store, registry, clock, policy)
    with Receiver() as receiver:
        port = receiver.server.server_address[1]
        endpoint, _ = endpoints.create("t1", url=f"http://rebind.example:{port}/hooks",
                                       event_types=["call.waiting"])
        real = socket.getaddrinfo

        def rebinding(host, *args, **kwargs):  # the name now points at the receiver's loopback
            return real("127.0.0.1", *args, **kwargs) if host == "rebind.example" else real(
                host, *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", rebinding)
        start(commands, runtime)
        flush(deliveries)
        assert receiver.connections == 0 and receiver.requests == []
    (delivery,) = store.webhooks.list_deliveries(endpoint.id, limit=10)
    assert delivery.attempt_log[-1]["outcome"] == "address_refused"
    assert delivery.status == "pending"  # tried again later: the name may be fixed


def test_a_stored_url_whose_host_dns_cannot_hold_is_refused_for_good_in_one_log_line(
    store, registry, clock, runtime, commands, caplog
):
    endpoints, deliveries = hooks(store, registry, clock)
    endpoint, _ = endpoints.create("t1", url="https://hooks.example.com/h", event_types=["turn.completed"])
    store.webhooks.update_endpoint(endpoint.id, tenant="t1", now=clock(),  # as stored before the check
                                   url=f"https://{'a' * 64}.example.com/h")
    start(commands, runtime, script=[{"text": "Done."}])
    with caplog.at_level(logging.INFO, logger="agentq"):
        flush(deliveries)
    (delivery,) = store.webhooks.list_deliveries(endpoint.id, limit=10)
    assert delivery.status == "failed" and delivery.attempt_log[-1]["outcome"] == "url_refused"
    said = [record for record in caplog.records if record.name.startswith("agentq.webhooks")]
    assert len(said) == 1 and said[0].exc_info is None, [r.getMessage() for r in said]


def test_an_endpoint_that_fails_for_a_day_is_disabled_and_says_why(
    store, registry, clock, runtime, commands
):
    endpoints, deliveries = hooks(store, registry, clock)
    with Receiver(script=[503] * 20) as receiver:
        endpoint, _ = endpoints.create("t1", url=receiver.url, event_types=["call.waiting"])
        start(commands, runtime)
        for delay in (0, *TEST_POLICY.retry_delays_s):
            clock.tick(delay)
            flush(deliveries)
            if not endpoints.get("t1", endpoint.id).enabled:
                break
    disabled = endpoints.get("t1", endpoint.id)
    assert not disabled.enabled and "every delivery failed" in disabled.disabled_reason
    assert clock() - disabled.failing_since >= timedelta(days=1)


def test_a_rotated_secret_and_the_old_one_both_sign_during_the_grace_period(
    store, registry, clock, runtime, commands
):
    endpoints, deliveries = hooks(store, registry, clock)
    with Receiver() as receiver:
        endpoint, old = endpoints.create("t1", url=receiver.url, event_types=["call.waiting"])
        _, new = endpoints.rotate("t1", endpoint.id, grace_s=3600)
        start(commands, runtime)
        flush(deliveries)
        assert verified(receiver, old) and verified(receiver, new)
        endpoints.rotate("t1", endpoint.id, grace_s=0)
        receiver.requests.clear()
        start(commands, runtime)
        flush(deliveries)
        with pytest.raises(WebhookVerificationError):
            verified(receiver, new)


def test_a_sealed_secret_copied_to_another_endpoint_does_not_open(store, registry, clock):
    endpoints, _ = hooks(store, registry, clock)
    first, _ = endpoints.create("t1", url="https://a.example.com/h", event_types=["call.waiting"])
    second, _ = endpoints.create("t1", url="https://b.example.com/h", event_types=["call.waiting"])
    store.webhooks.update_endpoint(second.id, tenant="t1", now=clock(),
                                   sealed_secret=first.sealed_secret)
    with pytest.raises(KeyBoxError):
        endpoints.signing_secrets(endpoints.get("t1", second.id), clock())


def test_another_tenants_events_and_a_forks_copied_log_reach_no_endpoint(
    store, registry, clock, runtime, commands
):
    endpoints, deliveries = hooks(store, registry, clock)
    endpoint, _ = endpoints.create("t2", url="https://hooks.example.com/h", event_types=ALL)
    conv = commands.create_conversation(ALICE, {})
    drain(runtime, commands.post_message(conv.id, "hi", ALICE)[1])
    commands.fork(conv.id, ALICE, at_seq=2)
    assert store.webhooks.list_deliveries(endpoint.id, limit=10) == []
    mine, _ = endpoints.create("t1", url="https://hooks.example.com/t1", event_types=ALL)
    commands.fork(conv.id, ALICE, at_seq=2)
    assert store.webhooks.list_deliveries(mine.id, limit=10) == []


def test_an_http_url_the_operator_no_longer_allows_is_never_sent_to(
    store, registry, clock, runtime, commands
):
    endpoints, _ = hooks(store, registry, clock)
    with Receiver() as receiver:
        endpoint, _ = endpoints.create("t1", url=receiver.url, event_types=["call.waiting"])
        stricter = WebhookEndpoints(store.webhooks, endpoints.keybox, WebhookPolicy(), clock)  # https only
        deliveries = Deliveries(store, stricter, registry, clock)
        start(commands, runtime)
        flush(deliveries)
        assert receiver.connections == 0
    (delivery,) = store.webhooks.list_deliveries(endpoint.id, limit=10)
    assert delivery.status == "failed" and delivery.attempt_log[-1]["outcome"] == "url_refused"


def test_a_sub_agents_waiting_call_says_which_conversation_and_agent_it_belongs_to(
    store, registry, clock, runtime, commands
):
    store.agents.create("t1", AgentDefinition(name="refunder", settings=Settings(
        script=REFUND, tools=["issue_refund"])), now=clock())
    endpoints, deliveries = hooks(store, registry, clock)
    with Receiver() as receiver:
        _, secret = endpoints.create("t1", url=receiver.url, event_types=["call.waiting"])
        conv = commands.create_conversation(ALICE, {"agents": ["refunder"], "script": [
            {"tool_calls": [{"name": "refunder", "args": {"input": "refund A-17"}}]}]})
        drain(runtime, commands.post_message(conv.id, "Please refund order A-17", ALICE)[1])
        flush(deliveries)
        (sent,) = verified(receiver, secret)
    (parent_call,) = store.calls.list_of(conv.id)
    child_id = parent_call.to_json()["child_conversation_id"]
    assert sent["data"]["conversation"] == {
        "id": child_id, "title": "refund A-17", "agent": "refunder",
        "parent": {"conversation_id": conv.id, "tool_call_id": parent_call.id, "depth": 1,
                   "root_conversation_id": conv.id}}


def test_a_turn_completed_after_a_handoff_says_where_the_conversation_went(
    store, registry, clock, runtime, commands
):
    store.agents.create("t1", AgentDefinition(name="billing", settings=Settings(
        script=[{"text": "Refunded."}], script_repeat=True)), now=clock())
    endpoints, deliveries = hooks(store, registry, clock)
    with Receiver() as receiver:
        _, secret = endpoints.create("t1", url=receiver.url, event_types=["turn.completed"])
        conv = commands.create_conversation(ALICE, {"handoffs": ["billing"], "script": [
            {"tool_calls": [{"name": "transfer_to_billing", "args": {"reason": "a refund"}}]}]})
        drain(runtime, commands.post_message(conv.id, "refund A-17", ALICE)[1])
        flush(deliveries)
        (sent,) = verified(receiver, secret)
    assert sent["data"]["answer"] == {"text": "Refunded."}
    assert sent["data"]["handoffs"] == [
        {"from": None, "to": "billing", "why": "a refund", "by": "model"}]
