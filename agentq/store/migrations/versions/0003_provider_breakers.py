"""The provider_breakers table: one circuit breaker per provider endpoint.

Revision ID: 0003
Revises: 0002
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentq.store.column_types import Timestamp

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "provider_breakers",
        sa.Column("endpoint", sa.Text, primary_key=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("failures", sa.Integer, nullable=False),
        sa.Column("trips", sa.Integer, nullable=False),
        sa.Column("until", Timestamp),
        sa.Column("last_error", sa.Text),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("provider_breakers")
