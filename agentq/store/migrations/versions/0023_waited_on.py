"""A step's `waited_on` flag: set on a running step when a step of its tenant may be
waiting for the slot it holds, so its commit reads what its freed slot wakes only then
(docs/design.md, inv. 9; `agentq.store.waits`).

Revision ID: 0023
Revises: 0015
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("steps", sa.Column("waited_on", sa.Boolean, nullable=False,
                                     server_default=sa.text("false")))


def downgrade() -> None:
    with op.batch_alter_table("steps") as batch:
        batch.drop_column("waited_on")
