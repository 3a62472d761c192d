"""People in the loop: calls that wait for a person's approval.

- `tool_calls.needs_approval`: a server call that runs only once a person approves its
  exact arguments (`@agentq.tool(needs_approval=...)`). Existing calls never did.

Revision ID: 0006
Revises: 0004
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tool_calls") as batch:
        batch.add_column(sa.Column("needs_approval", sa.Boolean(), nullable=False,
                                   server_default=sa.text("false")))


def downgrade() -> None:
    with op.batch_alter_table("tool_calls") as batch:
        batch.drop_column("needs_approval")
