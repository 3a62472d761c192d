"""The API under test: the Flask app on a real store, follow-ups captured and run in-process.

The `api`, `alice` and `mallory` fixtures (conftest.py) build on `Api`; `api.run()` drains
what the API sent through the runtime, like a worker would.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterator

from agentq.agents import CodeAgents
from agentq.agents.catalog import Catalog
from agentq.commands import Commands
from agentq.config import Config
from agentq.tenancy.keybox import KeyBox, new_encryption_key
from agentq.tenancy.own_keys import OwnKeys
from agentq.tenancy.policy import Policy
from agentq.tenancy.access import ModelAccess
from agentq.live.pubsub import PubSub
from agentq.mcp import tool_servers
from agentq.runtime import Runtime
from agentq.tools import Registry
from agentq.webhooks.endpoints import WebhookEndpoints
from agentq.webhooks.policy import WebhookPolicy
from tests.support.clock import Clock
from tests.support.drive import drain
from agentq.web.app import create_app
from agentq.web.auth import KeyRing
from agentq.web.services import Services
from tests.support.rules import Rules
from tests.support.sent import RecordingSender

TOOLS = ["agentq.tools.demo", "tests.support.tools_for_tests", "tests.support.guardrails_for_tests"]
WEATHER = [
    {"text": "Checking.", "tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}], "chunks": 3},
    {"text": "Cold in Oslo.", "chunks": 2},
]
APPROVAL = [
    {"text": "Needs approval.", "tool_calls": [{"name": "approve_payment", "args": {"amount": 20, "to": "Bob"}}],
     "chunks": 2},
    {"text": "Paid.", "chunks": 2},
]


class Api:
    """An app, its test client, and a runtime that plays the worker on demand.

    `policy` is the operator's (the built-in one by default) and `env` the worker's
    environment its profiles read keys from (none by default); `agents` the modules that
    define agents in code (published as the API process publishes them at start). A key
    found is trusted for `key_cache_s` (0: each request reads the store, so a revoked key is
    refused at once).
    """

    def __init__(self, store, *, policy: Policy | None = None, env: dict[str, str] | None = None,
                 agents: list[str] | None = None, key_cache_s: float = 0.0,
                 **app_config: Any) -> None:
        self.store = store
        self.clock = Clock(datetime.now(timezone.utc))  # the real now: keys and streams agree
        self.policy = policy or Policy.default()
        registry = Registry.from_modules(TOOLS, tool_servers(self.policy.mcp))
        self.pubsub = PubSub(f"embedded://api-tests-{uuid.uuid4().hex}")
        self.own_keys = OwnKeys(store.tenant_keys, self.policy, KeyBox([new_encryption_key()]), self.clock)
        code = CodeAgents.from_modules(agents or [], registry)
        access = ModelAccess(self.policy, self.own_keys.owner, env={} if env is None else env,
                             functions=code.functions)
        self.runtime = Runtime(store=store, registry=registry, pubsub=self.pubsub, config=Config(),
                               clock=self.clock, sleep=lambda s: None, rules=Rules(providers=access.provider_for, policy=self.policy))
        self.sender = RecordingSender()
        self.sent = self.sender.sent  # what the API sent, until run() takes it
        catalog = Catalog.published(store, self.policy.offers_agent, code, now=self.clock())
        self.services = Services(
            store=store, pubsub=self.pubsub,
            commands=Commands(store, registry, clock=self.clock, close_round=self.pubsub.close_round,
                              policy=self.policy, catalog=catalog),
            sender=self.sender, keys=KeyRing(store, None, cache_s=key_cache_s), own_keys=self.own_keys,
            webhooks=WebhookEndpoints(store.webhooks, KeyBox([new_encryption_key()]), WebhookPolicy(),
                                      self.clock),
        )
        self.app = create_app({"AGENTQ_SSE_KEEPALIVE_S": 0.05, **app_config}, self.services)
        self.client = self.app.test_client()

    def key(self, tenant: str, user: str | None = None, *, roles: tuple[str, ...] = ()
            ) -> dict[str, str]:
        _, secret = self.store.keys.create(tenant, self.clock(), roles=roles)
        headers = {"Authorization": f"Bearer {secret}"}
        if user:
            headers["X-Agentq-User"] = user
        return headers

    def run(self) -> list:
        """Run every follow-up the API sent, and what they ask for; the expiries not yet due."""
        followups, self.sent[:] = list(self.sent), []
        return drain(self.runtime, followups)

    def create(self, headers: dict[str, str], **settings: Any) -> str:
        response = self.client.post("/v1/conversations", json={"settings": settings}, headers=headers)
        assert response.status_code == 201, response.json
        return response.json["id"]

    def say(self, cid: str, text: str, headers: dict[str, str], **body: Any) -> Any:
        return self.client.post(f"/v1/conversations/{cid}/messages", json={"content": text, **body},
                                headers=headers)

    def get(self, path: str, headers: dict[str, str], **kwargs: Any) -> Any:
        return self.client.get(path, headers=headers, **kwargs)

    def types(self, cid: str) -> list[str]:
        return [e.type for e in self.store.log.list_events(cid)]


@dataclass
class Frame:
    event: str | None = None
    id: str | None = None
    data: Any = None
    comment: str | None = None


@dataclass
class SseReader:
    """Parses the frames of a streamed test-client response as they are produced."""

    response: Any
    buffer: str = ""
    chunks: Iterator[bytes] = field(init=False)

    def __post_init__(self) -> None:
        self.chunks = iter(self.response.response)

    def next(self) -> Frame | None:
        while "\n\n" not in self.buffer:
            chunk = next(self.chunks, None)
            if chunk is None:
                return None
            self.buffer += chunk.decode() if isinstance(chunk, bytes) else chunk
        raw, self.buffer = self.buffer.split("\n\n", 1)
        return parse_frame(raw)

    def frames(self, limit: int = 10_000) -> list[Frame]:
        """Frames until the stream ends (with ?until_idle=1) or `limit` of them."""
        out = []
        while len(out) < limit and (item := self.next()) is not None:
            out.append(item)
        return out

    def close(self) -> None:
        self.response.close()


def parse_frame(raw: str) -> Frame:
    frame = Frame()
    for line in raw.split("\n"):
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "":
            frame.comment = value
        elif name == "event":
            frame.event = value
        elif name == "id":
            frame.id = value
        elif name == "data":
            frame.data = json.loads(value)
        elif name == "retry":
            frame.event = "retry-interval"
    return frame


def events_of(frames: list[Frame]) -> list[dict]:
    return [f.data for f in frames if f.event == "event"]

