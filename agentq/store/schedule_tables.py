"""The tables of schedules, on the one schema's metadata (agentq.store.schema), kept apart
so that schema.py stays readable; agentq.store.schedules holds their verbs."""
from __future__ import annotations

from sqlalchemy import Boolean, Column, Float, ForeignKey, Index, Integer, String, Table, Text, text

from agentq.store.column_types import Json, Timestamp
from agentq.store.schema import ID, metadata

# A tenant's schedules (agentq.store.schedules): a calendar (a cron expression in a zone, or
# an interval), what a slot's run does, its catch-up rule and the next slot not yet fired.
schedules = Table(
    "schedules",
    metadata,
    Column("id", String(ID), primary_key=True),
    Column("tenant", String(ID), nullable=False),
    Column("name", String(ID), nullable=False),
    Column("cron", String(ID)),
    Column("timezone", String(64)),
    Column("every_s", Float),
    Column("action", String(16), nullable=False),  # start, post
    Column("agent", String(ID)),  # start: the agent (name or name@version)
    Column("conversation_id", String(ID)),  # post: the conversation posted to
    Column("message", Json, nullable=False),  # the message text or parts
    Column("catch_up", Json, nullable=False),  # {mode, max_slots, max_age_s}
    Column("approvals", Json, nullable=False),  # {mode, expire_after_s}
    Column("paused", Boolean, nullable=False),
    Column("next_at", Timestamp, nullable=False),  # the first slot not yet fired or skipped
    Column("created_at", Timestamp, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
    Index(None, "tenant", "created_at"),
    Index(None, "paused", "next_at"),
)

# One row per fired slot: its primary key is what makes a slot fire once, however many
# tickers race for it; its run's conversation and message ids derive from the same pair.
schedule_runs = Table(
    "schedule_runs",
    metadata,
    Column("schedule_id", String(ID), ForeignKey("schedules.id", ondelete="CASCADE"),
           primary_key=True),
    Column("slot_at", Timestamp, primary_key=True),
    Column("tenant", String(ID), nullable=False),
    Column("conversation_id", String(ID), nullable=False),
    Column("message_id", String(ID)),
    Column("status", String(16), nullable=False),  # due, fired, failed, given_up
    Column("error", Text),  # why it failed, or why its last attempt did
    Column("created_at", Timestamp, nullable=False),
    Column("fired_at", Timestamp),  # when it was fired, failed or given up
    Column("attempts", Integer, nullable=False, server_default=text("0")),  # tries so far
    Column("retry_at", Timestamp),  # a due run that failed: not tried again before then
    Index(None, "status", "created_at"),
)
