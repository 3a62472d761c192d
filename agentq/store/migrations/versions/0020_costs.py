"""What model calls cost: `cost_nanos` beside the tokens of the usage rollups and of the
budgets' running totals (agentq.core.prices: whole nanos of the policy's currency).

Calls counted before this revision cost 0: no prices were in force for them.

Revision ID: 0020
Revises: 0015
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0015"
branch_labels = None
depends_on = None

TABLES = ("usage_rollups", "budget_totals")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("cost_nanos", sa.BigInteger, nullable=False,
                                       server_default="0"))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("cost_nanos")
