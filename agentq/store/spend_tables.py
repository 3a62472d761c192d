"""The tables of what was spent (tokens and money, per hour, per budget period, per turn), on
the one schema's metadata (agentq.store.schema), kept apart so that schema.py stays readable;
agentq.store.usage, budget_totals and turn_usage hold their verbs."""
from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, PrimaryKeyConstraint, String, Table

from agentq.store.column_types import Timestamp
from agentq.store.schema import ID, metadata

# Token usage per tenant, hour, agent, profile, model and conversation (agentq.store.usage),
# added to in the transaction that commits each model call, so it counts each call once.
# "" stands for no agent and for the profile's default model: keys must not be NULL to
# conflict. No foreign key: usage outlives a deleted conversation, for billing.
usage_rollups = Table(
    "usage_rollups",
    metadata,
    Column("tenant", String(ID), nullable=False),
    Column("hour", Timestamp, nullable=False),
    Column("agent", String(64), nullable=False),
    Column("profile", String(ID), nullable=False),
    Column("model", String(ID), nullable=False),
    Column("conversation_id", String(ID), nullable=False),
    Column("input_tokens", BigInteger, nullable=False),
    Column("output_tokens", BigInteger, nullable=False),
    Column("cached_tokens", BigInteger, nullable=False),
    Column("reasoning_tokens", BigInteger, nullable=False),
    Column("calls", BigInteger, nullable=False),
    # the root of a tree of sub-agents the conversation belongs to (NULL: it is a root)
    Column("root_conversation_id", String(ID)),
    Column("cost_nanos", BigInteger, nullable=False, server_default="0"),  # core.prices
    PrimaryKeyConstraint("tenant", "hour", "agent", "profile", "model", "conversation_id"),
    Index(None, "hour"),  # the operator's reads across tenants
    Index(None, "root_conversation_id"),
)

# Running token totals that budgets read (agentq.store.budget_totals): per tenant, agent
# and conversation, one row each per period kind, holding the current period only (a commit
# in a later period starts it afresh), so a check reads a few rows by primary key and the
# table grows with tenants, agents and conversations, not with time. Added to in the
# transaction that commits each model call, like usage_rollups.
budget_totals = Table(
    "budget_totals",
    metadata,
    Column("tenant", String(ID), nullable=False),
    Column("scope", String(16), nullable=False),  # tenant, agent or conversation
    Column("name", String(ID), nullable=False),  # "", the agent's name, the conversation's id
    Column("period", String(8), nullable=False),  # hour, day, month, or life
    Column("period_start", Timestamp, nullable=False),
    Column("tokens", BigInteger, nullable=False),
    Column("cost_nanos", BigInteger, nullable=False, server_default="0"),
    PrimaryKeyConstraint("tenant", "scope", "name", "period"),
)

# One row per turn that made model calls, added to like usage_rollups (agentq.store.turn_usage).
turn_usage = Table(
    "turn_usage",
    metadata,
    Column("conversation_id", String(ID), nullable=False),
    Column("turn_id", String(ID), nullable=False),
    Column("tenant", String(ID), nullable=False),
    Column("agent", String(64), nullable=False),  # "" for none
    Column("root_conversation_id", String(ID)),
    Column("started_at", Timestamp, nullable=False),
    Column("duration_ms", BigInteger, nullable=False),
    *(Column(name, BigInteger, nullable=False)
      for name in ("input_tokens", "output_tokens", "calls", "cost_nanos")),
    PrimaryKeyConstraint("conversation_id", "turn_id"),
    Index(None, "started_at"),
)
