"""Blame and fair shares: only a step's own faults count against it, and the slots workers
offer are known where steps are claimed.

- `steps.faults`: attempts that can be the step's own fault (it raised, or its worker died
  while it ran alone); a step is given up after AGENTQ_MAX_ATTEMPTS of them.
- `steps.deaths`: attempts whose worker died under it and other steps at once; after
  two, the step runs alone (`agentq.store.ledger`).
- `worker_slots`: the slots each live worker process offers per queue, renewed while it
  runs; a tenant's default share of a queue derives from their sum (`agentq.store.slots`).

Existing rows count their past attempts as faults, as they did before.

Revision ID: 0008
Revises: 0004
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("steps") as batch:
        batch.add_column(sa.Column("faults", sa.Integer, nullable=False, server_default="0"))
        batch.add_column(sa.Column("deaths", sa.Integer, nullable=False, server_default="0"))
    op.execute("UPDATE steps SET faults = attempts")


def downgrade() -> None:
    with op.batch_alter_table("steps") as batch:
        batch.drop_column("deaths")
        batch.drop_column("faults")
