"""Who may decide, and what a person changed: roles on keys, the model's arguments on calls.

- `api_keys.roles`: the roles a key carries (a JSON list), which a tool's or the policy's
  deciders name (agentq.core.deciders). Existing keys carry none.
- `tool_calls.model_args`: the arguments the model gave, kept when a person approved the
  call with edited ones (`args` then holds theirs, which the tool runs with). Existing
  calls were never edited.

Revision ID: 0017
Revises: 0015
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentq.store.column_types import Json

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("roles", Json))
    with op.batch_alter_table("tool_calls") as batch:
        batch.add_column(sa.Column("model_args", Json))


def downgrade() -> None:
    with op.batch_alter_table("tool_calls") as batch:
        batch.drop_column("model_args")
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("roles")
