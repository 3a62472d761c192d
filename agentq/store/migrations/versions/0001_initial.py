"""Initial schema: every table of docs/design.md §12.

Revision ID: 0001
Revises:
"""
from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from agentq.store.column_types import Json, Timestamp

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _id(name: str, **kw: Any) -> sa.Column:
    return sa.Column(name, sa.String(255), **kw)


def _conversation_fk() -> sa.Column:
    return sa.Column(
        "conversation_id",
        sa.String(255),
        sa.ForeignKey("conversations.id", ondelete="CASCADE"),
        nullable=False,
    )


def upgrade() -> None:
    op.create_table(
        "conversations",
        _id("id", primary_key=True),
        _id("tenant", nullable=False),
        sa.Column("settings", Json, nullable=False),
        sa.Column("fsm_state", Json, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("next_seq", sa.Integer, nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=False),
    )
    op.create_index(None, "conversations", ["tenant", "created_at", "id"])
    op.create_index(None, "conversations", ["status"])
    op.create_table(
        "events",
        _id("id", primary_key=True),
        _conversation_fk(),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        _id("turn_id"),
        _id("round_id"),
        sa.Column("step_key", sa.String(64)),
        sa.Column("content", Json, nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.UniqueConstraint("conversation_id", "seq"),
    )
    op.create_table(
        "summaries",
        _id("id", primary_key=True),
        _conversation_fk(),
        sa.Column("from_seq", sa.Integer, nullable=False),
        sa.Column("to_seq", sa.Integer, nullable=False),
        sa.Column("content", Json, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.UniqueConstraint("conversation_id", "to_seq"),
    )
    op.create_table(
        "tool_calls",
        _conversation_fk(),
        _id("id", nullable=False),
        _id("name", nullable=False),
        sa.Column("executor", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("args", Json, nullable=False),
        sa.Column("result", Json),
        _id("round_id"),
        _id("turn_id"),
        sa.Column("expires_at", Timestamp),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("resolved_at", Timestamp),
        sa.PrimaryKeyConstraint("conversation_id", "id"),
    )
    op.create_index(None, "tool_calls", ["status", "expires_at"])
    op.create_table(
        "steps",
        sa.Column("step_key", sa.String(64), primary_key=True),
        _conversation_fk(),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("ref", Json, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("retries", sa.Integer, nullable=False, server_default="0"),
        sa.Column("lease_until", Timestamp),
        _id("worker"),
        sa.Column("celery_task_id", sa.String(64)),
        _id("round_id"),
        sa.Column("last_error", sa.Text),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("started_at", Timestamp),
        sa.Column("finished_at", Timestamp),
    )
    op.create_index(None, "steps", ["status", "lease_until"])
    op.create_index(None, "steps", ["conversation_id"])
    op.create_table(
        "inbox",
        _id("id", primary_key=True),
        _conversation_fk(),
        _id("idempotency_key"),
        sa.Column("content", Json, nullable=False),
        sa.Column("on_busy", sa.String(16), nullable=False),
        sa.Column("scope", Json, nullable=False),
        sa.Column("queued", sa.Boolean, nullable=False),
        _id("turn_id"),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("taken_at", Timestamp),
        sa.UniqueConstraint("conversation_id", "idempotency_key"),
    )
    op.create_table(
        "model_calls",
        _id("id", primary_key=True),
        _conversation_fk(),
        sa.Column("step_key", sa.String(64)),
        sa.Column("rendered_context", Json),
        _id("model"),
        sa.Column("usage", Json),
        sa.Column("latency_ms", sa.Integer),
        sa.Column("summary_version", sa.Integer),
        sa.Column("evictions", Json),
        sa.Column("created_at", Timestamp, nullable=False),
    )
    op.create_index(None, "model_calls", ["created_at"])
    op.create_table(
        "api_keys",
        _id("id", primary_key=True),
        _id("tenant", nullable=False),
        sa.Column("key_hash", sa.String(128), nullable=False, unique=True),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("revoked_at", Timestamp),
    )


def downgrade() -> None:
    for table in (
        "api_keys", "model_calls", "inbox", "steps", "tool_calls", "summaries", "events",
        "conversations",
    ):
        op.drop_table(table)

