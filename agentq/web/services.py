"""What the API runs on: the store, the commands, pub/sub, the keys, and how follow-ups are sent.

Built once per process from a Config, or handed in whole by a test, whose FollowUpSender
keeps the follow-ups (to run them with `tests.support.drive.drain`) instead of a broker.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from flask import current_app

from agentq.agents import CodeAgents
from agentq.agents.catalog import Catalog
from agentq.commands import Commands
from agentq.config import Config
from agentq.core.scope import Scope
from agentq.errors import NotFound
from agentq.followups import FollowUp
from agentq.live.announcer import LiveAnnouncer
from agentq.live.pubsub import Feed, PubSub
from agentq.mcp import tool_servers
from agentq.process.clock import utcnow
from agentq.process.cooperative import check_drivers
from agentq.providers.breakers import Board, board_for
from agentq.store import ConversationInfo, Store
from agentq.store.overview import Overview
from agentq.tenancy.own_keys import OwnKeys
from agentq.tenancy.policy import Policy
from agentq.tools import Registry
from agentq.web.auth import KeyRing
from agentq.web.streaming.shared_reads import SharedReads
from agentq.web.streaming.streams import OpenStreams, StreamLimits
from agentq.webhooks.endpoints import WebhookEndpoints
from agentq.webhooks.wiring import webhook_endpoints

log = logging.getLogger(__name__)

# An API process serves thousands of greenlets (open streams among them): more connections
# than a worker's few threads need, so a burst of stream openings does not starve the rest.
DB_POOL_SIZE, DB_POOL_OVERFLOW = 20, 20
Check = Callable[[], object]  # raises when its service is down; what it returns is ignored


class FollowUpSender(Protocol):
    """Where the API sends the follow-ups of its writes: the workers' broker (TaskSender), an
    embedded worker, or a test's recording of them."""

    def send(self, followups: list[FollowUp]) -> None:
        """Hand the follow-ups on; raises if they could not be (the sweeper re-drives them)."""


@dataclass
class Services:
    """Everything a request needs; `checks` are what /readyz runs (each raises when down)."""

    store: Store
    commands: Commands
    pubsub: PubSub
    sender: FollowUpSender
    keys: KeyRing
    checks: Mapping[str, Check] = field(default_factory=dict)
    close: Callable[[], None] = lambda: None
    metrics_token: str | None = None  # AGENTQ_METRICS_TOKEN: GET /metrics wants it as a bearer
    operator_key: str | None = None  # AGENTQ_OPERATOR_KEY: reads across tenants (GET /v1/usage)
    breakers: Board | None = None  # where the workers keep circuit breakers (None: the store)
    own_keys: OwnKeys | None = None  # tenants' own provider keys; None: this API takes none
    webhooks: WebhookEndpoints | None = None  # tenants' webhooks; None: no secrets are sealed
    stream_limits: StreamLimits = field(default_factory=StreamLimits)
    _open_streams: OpenStreams | None = field(default=None, repr=False)
    _shared_reads: SharedReads | None = field(default=None, repr=False)

    @property
    def shared_reads(self) -> SharedReads:
        """The log as the streams read it: one query for the streams that need the same page."""
        if self._shared_reads is None:
            self._shared_reads = SharedReads(self.store.log)
        return self._shared_reads

    @property
    def open_streams(self) -> OpenStreams:
        """This process's live streams: the cap per tenant, and the watch on their clients."""
        if self._open_streams is None:
            self._open_streams = OpenStreams(self.stream_limits)
        return self._open_streams

    @property
    def policy(self) -> Policy:
        """The operator's policy, which makes a conversation's settings of what a tenant asks for."""
        return self.commands.policy

    def conversation(self, conversation_id: str, scope: Scope) -> ConversationInfo:
        """The conversation if `scope`'s tenant owns it; another tenant's is NotFound too."""
        info = self.store.conversations.load(conversation_id, tenant=scope.tenant)
        if info is None:
            raise NotFound(f"no conversation {conversation_id}")
        return info

    def overview(self, conversation_id: str, scope: Scope) -> Overview:
        """The conversation at a glance, if `scope`'s tenant owns it; else NotFound."""
        found = self.store.overview.load(conversation_id, tenant=scope.tenant)
        if found is None:
            raise NotFound(f"no conversation {conversation_id}")
        return found

    def dispatch(self, followups: Iterable[FollowUp]) -> None:
        """Send follow-ups after the write; a broker that is down costs time, not work.

        The write is committed already and the sweeper re-drives what was not sent
        (docs/design.md §6), so a send failure is logged, not answered with a 500.
        """
        followups = list(followups)
        if not followups:
            return
        try:
            self.sender.send(followups)
        except Exception:
            log.exception("could not send %d follow-up(s); the sweeper will re-drive", len(followups))

    def announce(self, conversation_id: str) -> None:
        """Tell live streams that the API appended events (the runtime announces its own).

        The notice is only a trigger: a stream reads the log after the last seq it sent.
        """
        LiveAnnouncer(self.pubsub).new_events(conversation_id, None)

    def subscription(self, conversation_id: str, *, keepalive_s: float) -> Subscription:
        """What a stream of the conversation subscribes to once it is admitted."""
        return Subscription(self.pubsub, conversation_id, keepalive_s)


@dataclass(frozen=True)
class Subscription:
    """One conversation's notices on the pub/sub, for a stream to subscribe to."""

    pubsub: PubSub
    conversation_id: str
    keepalive_s: float  # the feed's wait for a notice before the stream sends a keepalive

    def feed(self, capacity: int) -> Feed:
        """A feed of the conversation's notices holding up to `capacity`; close it after."""
        return self.pubsub.subscribe(self.conversation_id, timeout_s=self.keepalive_s,
                                     capacity=capacity)


class TaskSender:
    """The FollowUpSender of an API process: follow-ups go to the workers as tasks on the
    broker (`worker.tasks.enqueue`)."""

    def __init__(self, celery) -> None:
        self.celery = celery

    def send(self, followups: list[FollowUp]) -> None:
        from agentq.worker.tasks import enqueue  # celery is loaded only where tasks are sent

        enqueue(self.celery, followups)


def services() -> Services:
    """The services of the app serving this request."""
    return current_app.extensions["agentq"]


def build_services(config: Config) -> Services:
    """Services for a standalone API process: its own store, broker connection and pub/sub."""
    from agentq.worker.factory import create_celery

    check_drivers()
    store = Store.open(config.database_url, pool_size=DB_POOL_SIZE, max_overflow=DB_POOL_OVERFLOW)
    policy = Policy.from_config(config)
    celery = create_celery(config, runtime=_no_runtime)
    pubsub = PubSub(config.redis_url)
    checks: dict[str, Check] = {
        "database": lambda: store.conversations.load("readyz-probe"),
        "broker": lambda: _ping_broker(celery),
    }
    if not config.redis_url.startswith("embedded://"):
        checks["pubsub"] = lambda: pubsub.client.ping()

    def close() -> None:
        celery.close()
        store.dispose()

    registry = Registry.from_modules(list(config.tools), tool_servers(policy.mcp))
    agents = CodeAgents.from_modules(list(config.tools), registry)
    catalog = Catalog(store, policy.offers_agent, agents)  # published at its first read
    return Services(
        store=store,
        commands=Commands(store, registry, close_round=pubsub.close_round, policy=policy,
                          catalog=catalog),
        pubsub=pubsub,
        sender=TaskSender(celery),
        keys=KeyRing(store, config.api_key),
        checks=checks,
        close=close,
        breakers=board_for(config.redis_url, pubsub.client, store.breakers),
        metrics_token=config.metrics_token,
        operator_key=config.operator_key,
        own_keys=OwnKeys.from_config(config, store, policy, utcnow),
        webhooks=webhook_endpoints(config, store, utcnow),
        stream_limits=stream_limits(config),
    )


def stream_limits(config: Config) -> StreamLimits:
    return StreamLimits(per_tenant=config.max_streams_per_tenant, buffer=config.stream_buffer,
                        stall_s=config.stream_stall_s)


def _no_runtime():
    raise RuntimeError("the API process sends tasks; it never runs them")


def _ping_broker(celery) -> None:
    with celery.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0.2, timeout=2)


def embedded_services(embedded, api_key: str | None) -> Services:
    """Services over an `agentq.worker.embedded.Embedded`: its store, commands, pub/sub and worker."""
    store = embedded.runtime.store
    return Services(
        store=store,
        commands=embedded.commands,
        pubsub=embedded.runtime.pubsub,
        sender=embedded,
        keys=KeyRing(store, api_key),
        checks={"database": lambda: store.conversations.load("readyz-probe")},
        metrics_token=embedded.config.metrics_token,
        operator_key=embedded.config.operator_key,
        own_keys=embedded.own_keys,
        webhooks=webhook_endpoints(embedded.config, store, utcnow),
        stream_limits=stream_limits(embedded.config),
    )
