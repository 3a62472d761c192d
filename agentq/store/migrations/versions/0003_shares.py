"""A fair share of the workers: each step row names its tenant, and a capped step can wait.

- `steps.tenant`: the tenant of the step's conversation, so a claim counts the steps of
  one tenant without a join. Existing rows take their conversation's tenant.
- `ix_steps_tenant_busy`: that tenant's running and waiting steps by arrival, the rows a
  capped claim counts (partial: finished rows, most of the table, are not in it).
- The new step status `waiting` (a step refused a slot by its tenant's cap) needs no
  schema change: `status` is free text.

Revision ID: 0003
Revises: 0002
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_BUSY = "status IN ('running', 'waiting')"


def upgrade() -> None:
    op.add_column("steps", sa.Column("tenant", sa.String(255), nullable=True))
    op.execute(
        "UPDATE steps SET tenant = (SELECT tenant FROM conversations"
        " WHERE conversations.id = steps.conversation_id)"
    )
    with op.batch_alter_table("steps") as batch:
        batch.alter_column("tenant", existing_type=sa.String(255), nullable=False)
    op.create_index("ix_steps_tenant_busy", "steps", ["tenant", "status", "created_at"],
                    postgresql_where=sa.text(_BUSY), sqlite_where=sa.text(_BUSY))


def downgrade() -> None:
    # A step left waiting runs again as soon as a worker takes it, as before the caps.
    op.execute("UPDATE steps SET status = 'scheduled' WHERE status = 'waiting'")
    op.drop_index("ix_steps_tenant_busy", "steps")
    with op.batch_alter_table("steps") as batch:
        batch.drop_column("tenant")
