"""Questions of tool servers: what an MCP server asked a person mid-call, and their answer.

- `tool_calls.elicitation`: the question (message and requested schema), what the server
  needs back when the call is made again, and the person's answer. Existing calls never
  asked.

Revision ID: 0011
Revises: 0014
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentq.store.column_types import Json

revision = "0011"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tool_calls") as batch:
        batch.add_column(sa.Column("elicitation", Json))


def downgrade() -> None:
    with op.batch_alter_table("tool_calls") as batch:
        batch.drop_column("elicitation")
