"""Usage rollups: tokens and calls per tenant, hour, agent, profile, model and conversation.

`usage_rollups` is added to in the transaction that commits each model call
(agentq.store.usage); GET /v1/usage and token budgets read it, never the events.

Revision ID: 0009
Revises: 0008
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentq.store.column_types import Timestamp

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "usage_rollups",
        sa.Column("tenant", sa.String(255), nullable=False),
        sa.Column("hour", Timestamp, nullable=False),
        sa.Column("agent", sa.String(64), nullable=False),
        sa.Column("profile", sa.String(255), nullable=False),
        sa.Column("model", sa.String(255), nullable=False),
        sa.Column("conversation_id", sa.String(255), nullable=False),
        sa.Column("input_tokens", sa.BigInteger, nullable=False),
        sa.Column("output_tokens", sa.BigInteger, nullable=False),
        sa.Column("cached_tokens", sa.BigInteger, nullable=False),
        sa.Column("reasoning_tokens", sa.BigInteger, nullable=False),
        sa.Column("calls", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("tenant", "hour", "agent", "profile", "model", "conversation_id",
                                name="pk_usage_rollups"),
    )
    op.create_index("ix_usage_rollups_hour", "usage_rollups", ["hour"])


def downgrade() -> None:
    op.drop_index("ix_usage_rollups_hour", table_name="usage_rollups")
    op.drop_table("usage_rollups")
