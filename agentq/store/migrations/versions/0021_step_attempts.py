"""Each claim of a step, kept on its row: `steps.attempt_log`, a JSON list of {worker,
claimed_at, after, error}, one entry appended by the statement that claims it, so a turn's
timeline shows every attempt and its worker, not only the last (agentq.core.timeline).

Revision ID: 0021
Revises: 0015
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentq.store.column_types import Json

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("steps") as batch:
        batch.add_column(sa.Column("attempt_log", Json))


def downgrade() -> None:
    with op.batch_alter_table("steps") as batch:
        batch.drop_column("attempt_log")
