"""The Store: the engine, its dialect, the event cache, and the store's roles, one object
per kind of thing stored (`store.conversations`, `store.log`, `store.writes`, `store.steps`,
…). Each role's public methods are one transaction each, composed from `…_txn(conn, …)`
helpers; a caller takes the role it uses.

Time is passed in (`now`), never read here, so every transition is testable with plain
datetimes and the caller decides which clock counts.
"""
from __future__ import annotations

from sqlalchemy import Engine

from agentq.store import dialects, idle_connections
from agentq.store.agents import Agents
from agentq.store.api_keys import ApiKeys
from agentq.store.audit import Audit
from agentq.store.backlog import Backlog
from agentq.store.breakers import Breakers
from agentq.store.calls import Calls
from agentq.store.conversations import Conversations
from agentq.store.dialects import Dialect
from agentq.store.engine import POOL_SIZE, create_engine
from agentq.store.event_cache import DEFAULT_MAX_BYTES as DEFAULT_CACHE_BYTES
from agentq.store.event_cache import EventCache
from agentq.store.inbox import Inbox
from agentq.store.log import EventLog
from agentq.store.metrics import Metrics
from agentq.store.migrations import migrate
from agentq.store.overview import Overviews
from agentq.store.schedules import Schedules
from agentq.store.slots import Slots
from agentq.store.step_ledger import Leases, Steps
from agentq.store.sweeper_lock import Sweeps
from agentq.store.tenant_keys import TenantKeys
from agentq.store.timeline import Timelines
from agentq.store.turn_usage import Turns
from agentq.store.usage import Usage
from agentq.store.webhooks import Webhooks
from agentq.store.writes import Writes


class Store:
    """Durable state of every conversation, on PostgreSQL or SQLite."""

    def __init__(self, engine: Engine, *, dialect: Dialect | None = None, event_cache: int = 0,
                 event_cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.engine = engine
        self.dialect = dialect or dialects.of(engine)
        # decoded events of the `event_cache` conversations stepped last (0: none kept)
        self.event_cache = EventCache(event_cache, event_cache_bytes)
        on = (engine, self.dialect)
        self.conversations = Conversations(*on)
        self.log = EventLog(*on, self.event_cache)
        self.writes = Writes(*on)
        self.calls = Calls(*on)
        self.inbox = Inbox(*on)
        self.steps = Steps(*on)
        self.leases = Leases(*on)
        self.backlog = Backlog(*on)
        self.sweeps = Sweeps(*on)
        self.slots = Slots(*on)
        self.audit = Audit(*on)
        self.usage = Usage(*on)
        self.overview = Overviews(*on)
        self.metrics = Metrics(*on)
        self.agents = Agents(*on)
        self.keys = ApiKeys(*on)
        self.tenant_keys = TenantKeys(*on)
        self.webhooks = Webhooks(*on)
        self.breakers = Breakers(*on)
        self.turns = Turns(*on)
        self.timelines = Timelines(*on)
        self.schedules = Schedules(*on)

    @classmethod
    def open(cls, url: str, *, event_cache: int = 0,
             event_cache_bytes: int = DEFAULT_CACHE_BYTES, pool_size: int = POOL_SIZE,
             max_overflow: int = 0) -> Store:
        """A store on `url` (`sqlite:///file` or `postgresql://…`); call `migrate` once first.

        `event_cache`: how many conversations' events `log.reader` keeps decoded (a
        worker's), `event_cache_bytes` about how many bytes of them at most; `pool_size`
        and `max_overflow`: the connection pool's (PostgreSQL's only).
        """
        engine = create_engine(url, pool_size=pool_size, max_overflow=max_overflow)
        return cls(engine, event_cache=event_cache,
                   event_cache_bytes=event_cache_bytes)

    def migrate(self) -> None:
        """Bring the schema to the newest Alembic revision; harmless when it is there."""
        migrate(self.engine)

    def pool_size(self) -> int:
        """How many pooled connections this process's steps share (`create_engine`)."""
        size = getattr(self.engine.pool, "size", None)
        return max(1, size()) if callable(size) else POOL_SIZE

    def dispose(self) -> None:
        """Close every pooled connection."""
        idle_connections.dispose(self.engine)
        self.leases.dispose()
