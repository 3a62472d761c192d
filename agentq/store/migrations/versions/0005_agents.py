"""Agents: named, versioned definitions that conversations are started from.

- `agent_versions`: every published version of every agent, one immutable row each,
  keyed by owner (a tenant, or "" for agents defined in code), name and version number.
- `conversations.agent_name`, `conversations.agent_version`: the version a conversation
  was started from; null for conversations created from settings (all existing ones).

Revision ID: 0005
Revises: 0004
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentq.store.column_types import Json, Timestamp

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agent_versions",
        sa.Column("tenant", sa.String(255), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("source", sa.String(8), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("settings", Json, nullable=False),
        sa.Column("overridable", Json, nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("tenant", "name", "version", name="pk_agent_versions"),
    )
    # Plain ALTER TABLE on both (SQLite 3.35+ drops columns in place): a batch copy of
    # `conversations` would drop the table, and its events, steps and calls with it (cascade).
    op.add_column("conversations", sa.Column("agent_name", sa.String(64), nullable=True))
    op.add_column("conversations", sa.Column("agent_version", sa.Integer, nullable=True))


def downgrade() -> None:
    op.drop_column("conversations", "agent_version")
    op.drop_column("conversations", "agent_name")
    op.drop_table("agent_versions")
