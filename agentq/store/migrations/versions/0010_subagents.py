"""Sub-agents: a child conversation knows its parent's call, its depth and its root; usage
rollups know the root, so a tree's tokens add up.

Revision ID: 0010
Revises: 0012
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ALTER TABLE on both (as 0005): a batch copy of `conversations` would drop the
    # table, and its events, steps and calls with it (cascade).
    op.add_column("conversations", sa.Column("parent_conversation_id", sa.String(255)))
    op.add_column("conversations", sa.Column("parent_call_id", sa.String(255)))
    op.add_column("conversations", sa.Column("depth", sa.Integer, nullable=False,
                                             server_default="0"))
    op.add_column("conversations", sa.Column("root_conversation_id", sa.String(255)))
    op.add_column("usage_rollups", sa.Column("root_conversation_id", sa.String(255)))
    op.create_index("ix_usage_rollups_root_conversation_id", "usage_rollups",
                    ["root_conversation_id"])


def downgrade() -> None:
    op.drop_index("ix_usage_rollups_root_conversation_id", "usage_rollups")
    op.drop_column("usage_rollups", "root_conversation_id")
    for column in ("root_conversation_id", "depth", "parent_call_id", "parent_conversation_id"):
        op.drop_column("conversations", column)
