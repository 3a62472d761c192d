"""A schedule run's attempts: how often a tick tried to carry it out, and when a run whose
attempt failed is tried again, so a slot that can never fire is given up after a bounded
number of attempts instead of staying due (docs/operations.md, "Schedules").

Revision ID: 0025
Revises: 0023
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentq.store.column_types import Timestamp

revision = "0025"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("schedule_runs", sa.Column("attempts", sa.Integer, nullable=False,
                                             server_default=sa.text("0")))
    op.add_column("schedule_runs", sa.Column("retry_at", Timestamp()))


def downgrade() -> None:
    op.execute("UPDATE schedule_runs SET status = 'failed' WHERE status = 'given_up'")
    with op.batch_alter_table("schedule_runs") as batch:
        batch.drop_column("retry_at")
        batch.drop_column("attempts")
