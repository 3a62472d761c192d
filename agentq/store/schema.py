"""The tables of agentq: one SQLAlchemy Core schema for PostgreSQL and SQLite (docs/design.md §12).

The Alembic migrations create exactly these tables; a test compares the two. Columns
are named as the fields of the records they hold, so a row maps to its record by name.
"""
from __future__ import annotations

from dataclasses import fields
from typing import Any, TypeVar

from sqlalchemy import (
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Row,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from agentq.store.column_types import Json, JsonText, Timestamp
from agentq.store.dialects import postgres, sqlite

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
metadata = MetaData(naming_convention=NAMING)

ID = 255  # uuid4 text for our ids; tool call ids come from providers and vary in length


def _conversation_fk() -> Column[str]:
    return Column(
        "conversation_id",
        String(ID),
        ForeignKey("conversations.id", ondelete="CASCADE"),
        nullable=False,
    )


# A conversation in a running turn, per dialect, as literal SQL: a partial index's
# predicate and the query it serves must read the same (no bound parameters).

conversations = Table(
    "conversations",
    metadata,
    Column("id", String(ID), primary_key=True),
    Column("tenant", String(ID), nullable=False),
    # read as text: decoded only when it is not what the reader decoded last
    Column("settings", JsonText, nullable=False),
    Column("fsm_state", Json, nullable=False),
    Column("status", String(16), nullable=False),
    Column("next_seq", Integer, nullable=False),
    Column("created_at", Timestamp, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
    # The agent version it was started from (agentq.core.agents), if any: its settings
    # were copied into `settings` then, so nothing reads the agent again.
    Column("agent_name", String(64)),
    Column("agent_version", Integer),
    # A child conversation started by a sub-agent call (agentq.core.subagents): the call it
    # answers, how deep it nests (a root is 0) and the root whose usage it counts in.
    Column("parent_conversation_id", String(ID)),
    Column("parent_call_id", String(ID)),
    Column("depth", Integer, nullable=False, server_default="0"),
    Column("root_conversation_id", String(ID)),
    Index(None, "tenant", "created_at", "id"),
    Index(None, "status"),
    # The active conversations in a running turn, by when they last moved: what the sweeper
    # looks through for stalled ones (`list_stalled_conversations_txn`), however many idle.
    Index("ix_conversations_running", "updated_at", "id",
          postgresql_where=text(f"status = 'active' AND {postgres.RUNNING_STATE}"),
          sqlite_where=text(f"status = 'active' AND {sqlite.RUNNING_STATE}")),
)

events = Table(
    "events",
    metadata,
    Column("id", String(ID), primary_key=True),
    _conversation_fk(),
    Column("seq", Integer, nullable=False),
    Column("type", String(32), nullable=False),
    Column("turn_id", String(ID)),
    Column("round_id", String(ID)),
    Column("step_key", String(64)),
    Column("content", Json, nullable=False),
    Column("created_at", Timestamp, nullable=False),
    UniqueConstraint("conversation_id", "seq"),
)

summaries = Table(
    "summaries",
    metadata,
    Column("id", String(ID), primary_key=True),
    _conversation_fk(),
    Column("from_seq", Integer, nullable=False),
    Column("to_seq", Integer, nullable=False),
    Column("content", Json, nullable=False),
    Column("version", Integer, nullable=False),
    Column("created_at", Timestamp, nullable=False),
    UniqueConstraint("conversation_id", "to_seq"),
)

tool_calls = Table(
    "tool_calls",
    metadata,
    _conversation_fk(),
    Column("id", String(ID), nullable=False),
    Column("name", String(ID), nullable=False),
    Column("executor", String(16), nullable=False),
    Column("status", String(16), nullable=False),
    Column("args", Json, nullable=False),
    Column("result", Json),
    Column("round_id", String(ID)),
    Column("turn_id", String(ID)),
    Column("expires_at", Timestamp),
    Column("created_at", Timestamp, nullable=False),
    Column("resolved_at", Timestamp),
    # a server call that waits for a person's approval before it runs (migration 0006)
    Column("needs_approval", Boolean, nullable=False, server_default=text("false")),
    # what its tool server asked a person, and their answer (MCP elicitation, migration 0011)
    Column("elicitation", Json),
    # a `once` tool's call: the start mark of its current run (agentq.core.once, migration 0016)
    Column("started", Json),
    # the model's arguments when a person approved the call with edited ones (migration 0017)
    Column("model_args", Json),
    PrimaryKeyConstraint("conversation_id", "id"),
    Index(None, "status", "expires_at"),
)

steps = Table(
    "steps",
    metadata,
    Column("step_key", String(64), primary_key=True),
    _conversation_fk(),
    Column("tenant", String(ID), nullable=False),  # the conversation's: whose share it uses
    Column("kind", String(16), nullable=False),
    Column("ref", Json, nullable=False),
    Column("status", String(32), nullable=False),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("retries", Integer, nullable=False, server_default="0"),
    # attempts that can be the step's own fault: it raised, or its worker died while it ran alone
    Column("faults", Integer, nullable=False, server_default="0"),
    # attempts whose worker died under it and other steps at once: no fault, but a suspicion
    Column("deaths", Integer, nullable=False, server_default="0"),
    Column("lease_until", Timestamp),
    Column("worker", String(ID)),
    Column("celery_task_id", String(64)),
    Column("round_id", String(ID)),
    Column("last_error", Text),
    Column("created_at", Timestamp, nullable=False),
    Column("started_at", Timestamp),
    Column("finished_at", Timestamp),
    # every claim of the step, oldest first: [{worker, claimed_at, after, error}], where
    # `after` is the status the claim found (how the attempt before it ended; migration 0021)
    Column("attempt_log", Json),
    # a step of the tenant may wait for the slot this running step holds: its commit reads
    # what the freed slot wakes (agentq.store.waits); unset, that read is skipped
    Column("waited_on", Boolean, nullable=False, server_default=text("false")),
    Index(None, "status", "lease_until"),
    Index(None, "conversation_id"),
    # A tenant's steps that hold or wait for a slot, by arrival: what a capped claim counts.
    Index("ix_steps_tenant_busy", "tenant", "status", "created_at",
          postgresql_where=text("status IN ('running', 'waiting')"),
          sqlite_where=text("status IN ('running', 'waiting')")),
)

inbox = Table(
    "inbox",
    metadata,
    Column("id", String(ID), primary_key=True),
    _conversation_fk(),
    Column("idempotency_key", String(ID)),
    Column("content", Json, nullable=False),
    Column("on_busy", String(16), nullable=False),
    Column("scope", Json, nullable=False),
    Column("queued", Boolean, nullable=False),
    Column("turn_id", String(ID)),
    Column("created_at", Timestamp, nullable=False),  # as the client said: only recorded
    Column("taken_at", Timestamp),
    # The order messages arrived in, per conversation (1, 2, …): turns start in this order,
    # whatever created_at a client sent.
    Column("arrival", Integer, nullable=False),
    Column("request_hash", String(64)),  # sha256 of the request, for Idempotency-Key reuse
    UniqueConstraint("conversation_id", "idempotency_key"),
    Index(None, "conversation_id", "arrival", unique=True),
    # The messages not yet taken: the other half of what the sweeper looks through.
    Index("ix_inbox_untaken", "conversation_id", postgresql_where=text("taken_at IS NULL"),
          sqlite_where=text("taken_at IS NULL")),
)

model_calls = Table(
    "model_calls",
    metadata,
    Column("id", String(ID), primary_key=True),
    _conversation_fk(),
    Column("step_key", String(64)),
    Column("rendered_context", Json),
    Column("model", String(ID)),
    Column("usage", Json),
    Column("latency_ms", Integer),
    Column("summary_version", Integer),
    Column("evictions", Json),
    Column("created_at", Timestamp, nullable=False),
    Index(None, "created_at"),
)

# Every published version of every agent, immutable: a tenant's (`tenant` is its name) or
# one defined in the code the processes load (`tenant` is CODE_OWNER, "").
agent_versions = Table(
    "agent_versions",
    metadata,
    Column("tenant", String(ID), nullable=False),
    Column("name", String(64), nullable=False),
    Column("version", Integer, nullable=False),
    Column("digest", String(64), nullable=False),  # sha256 of the canonical definition
    Column("source", String(8), nullable=False),  # "api" or "code"
    Column("description", Text, nullable=False),
    Column("settings", Json, nullable=False),  # as set: defaults left out
    Column("overridable", Json, nullable=False),
    Column("created_at", Timestamp, nullable=False),
    PrimaryKeyConstraint("tenant", "name", "version"),
)

# A tenant's own provider key for one profile, sealed (agentq.tenancy.keybox); never stored in clear.
tenant_keys = Table(
    "tenant_keys",
    metadata,
    Column("tenant", String(ID), nullable=False),
    Column("profile", String(ID), nullable=False),
    Column("sealed", Text, nullable=False),
    Column("created_at", Timestamp, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
    PrimaryKeyConstraint("tenant", "profile"),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(ID), primary_key=True),
    Column("tenant", String(ID), nullable=False),
    Column("key_hash", String(128), nullable=False, unique=True),
    Column("created_at", Timestamp, nullable=False),
    Column("revoked_at", Timestamp),
    Column("roles", Json),  # the roles the key carries, for deciders (migration 0017)
)


worker_slots = Table(  # the slots each live worker process offers per queue (agentq.store.slots)
    "worker_slots",
    metadata,
    Column("worker", String(ID), primary_key=True),
    Column("queue", String(ID), primary_key=True),
    Column("slots", Integer, nullable=False),
    Column("expires_at", Timestamp, nullable=False),
)

provider_breakers = Table(  # one circuit breaker per provider endpoint (agentq.providers.breakers)
    "provider_breakers",
    metadata,
    Column("endpoint", Text, primary_key=True),
    Column("state", String(16), nullable=False),
    Column("failures", Integer, nullable=False),
    Column("trips", Integer, nullable=False),
    Column("until", Timestamp),
    Column("last_error", Text),
    Column("version", Integer, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
)

# A tenant's webhook endpoint (agentq.webhooks): its signing secret sealed (agentq.tenancy.keybox),
# bound to this row; during a rotation's grace period the previous secret signs too.
webhook_endpoints = Table(
    "webhook_endpoints",
    metadata,
    Column("id", String(ID), primary_key=True),
    Column("tenant", String(ID), nullable=False),
    Column("url", Text, nullable=False),
    Column("event_types", Json, nullable=False),
    Column("sealed_secret", Text, nullable=False),
    Column("previous_sealed", Text),
    Column("previous_until", Timestamp),
    Column("enabled", Boolean, nullable=False),
    Column("disabled_reason", Text),
    Column("failing_since", Timestamp),  # the first failure since the last success
    Column("created_at", Timestamp, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
    Index(None, "tenant"),
)

# The outbox: one row per (endpoint, occurrence), written in the transaction of the log
# event that causes it; its id is the `webhook-id` every attempt carries (inv. 10).
webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("id", String(ID), primary_key=True),
    Column("endpoint_id", String(ID), ForeignKey("webhook_endpoints.id", ondelete="CASCADE"),
           nullable=False),
    Column("tenant", String(ID), nullable=False),
    Column("conversation_id", String(ID), nullable=False),
    Column("seq", Integer, nullable=False),  # the log event that caused it
    Column("event_type", String(32), nullable=False),
    Column("ref", Json, nullable=False),
    Column("status", String(16), nullable=False),  # pending, delivering, delivered, failed
    Column("attempts", Integer, nullable=False),
    Column("next_attempt_at", Timestamp, nullable=False),
    Column("lease_until", Timestamp),
    Column("last_status_code", Integer),
    Column("attempt_log", Json, nullable=False),
    Column("created_at", Timestamp, nullable=False),
    Column("delivered_at", Timestamp),
    Index(None, "status", "next_attempt_at"),
    Index(None, "endpoint_id", "created_at"),
)

Record = TypeVar("Record")


def record_from_row(cls: type[Record], row: Row[Any], prefix: str = "") -> Record:
    """The dataclass `cls` from the columns of `row` named as its fields (after `prefix`)."""
    mapping = row._mapping
    return cls(**{name: mapping[prefix + name] for name in _field_names(cls)})


def record_values(record: object) -> dict[str, Any]:
    """The columns of a row that holds `record` (a shallow copy: nothing nested is copied)."""
    return {name: getattr(record, name) for name in _field_names(type(record))}


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}  # per record class, worked out once


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:  # two threads racing both work out the same names
        names = _FIELD_NAMES[cls] = tuple(field.name for field in fields(cls))
    return names
