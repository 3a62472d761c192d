"""`agentq dev`'s one process delivers webhooks too: its worker takes the webhook queue and a
thread plays beat's relay (there is no beat process to do it)."""
from __future__ import annotations

from standardwebhooks import Webhook

from agentq.config import Config
from agentq.core.scope import Scope
from agentq.process.clock import utcnow
from agentq.tenancy.keybox import KeyBox, new_encryption_key
from agentq.webhooks.endpoints import WebhookEndpoints
from agentq.webhooks.policy import WebhookPolicy
from agentq.worker.embedded import Embedded
from tests.support.processes import wait_for
from tests.support.receiver import Receiver

ALICE = Scope(tenant="t1", user="alice")


def test_an_embedded_deployment_delivers_a_turns_webhook(tmp_path):
    key = new_encryption_key()
    config = Config(database_url=f"sqlite:///{tmp_path / 'agentq.db'}", encryption_keys=key,
                    webhook_allow_http=True, webhook_allow_loopback=True, webhook_poll_s=0.2,
                    tools=("agentq.tools.demo",))
    embedded = Embedded(config)
    with Receiver() as receiver:
        endpoints = WebhookEndpoints(embedded.runtime.store.webhooks, KeyBox([key]),
                                     WebhookPolicy(allow_http=True, allow_loopback=True), utcnow)
        _, secret = endpoints.create("t1", url=receiver.url, event_types=["turn.completed"])

        def main(process: Embedded) -> int:
            conv = process.commands.create_conversation(ALICE, {})
            _, follow = process.commands.post_message(conv.id, "hello", ALICE)
            process.send(follow)
            wait_for(lambda: receiver.requests, what="the turn's webhook")
            return 0

        assert embedded.run(main) == 0
        (request,) = receiver.requests
    sent = Webhook(secret).verify(request.body, request.headers)
    assert sent["type"] == "turn.completed" and sent["data"]["answer"] == {"text": "echo: hello"}
