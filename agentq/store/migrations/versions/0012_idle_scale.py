"""The sweeper's look for stalled conversations reads only those that can be stalled.

It read every active conversation that had not moved lately, idle ones included: 1.8 s
a sweep with 100,000 idle conversations (bench/idle_scale.py). Two partial indexes hold
only what it looks for:

- `ix_conversations_running`: active conversations in a running turn, by `updated_at`;
- `ix_inbox_untaken`: messages not yet taken, by conversation.

Revision ID: 0012
Revises: 0011
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentq.store.dialects import postgres, sqlite

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_conversations_running", "conversations", ["updated_at", "id"],
        postgresql_where=sa.text(f"status = 'active' AND {postgres.RUNNING_STATE}"),
        sqlite_where=sa.text(f"status = 'active' AND {sqlite.RUNNING_STATE}"),
    )
    op.create_index("ix_inbox_untaken", "inbox", ["conversation_id"],
                    postgresql_where=sa.text("taken_at IS NULL"),
                    sqlite_where=sa.text("taken_at IS NULL"))


def downgrade() -> None:
    op.drop_index("ix_inbox_untaken", table_name="inbox")
    op.drop_index("ix_conversations_running", table_name="conversations")
