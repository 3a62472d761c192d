"""What model calls cost: `cost_nanos` beside the tokens of the usage rollups and of the
budgets' running totals (agentq.core.prices: whole nanos of the policy's currency), and
`turn_usage`, one row per turn with its tokens, cost and duration (agentq.store.turn_usage).

Calls counted before this revision cost 0: no prices were in force for them; turns before
it have no row.

Revision ID: 0020
Revises: 0015
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentq.store.column_types import Timestamp

revision = "0020"
down_revision = "0017"
branch_labels = None
depends_on = None

TABLES = ("usage_rollups", "budget_totals")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("cost_nanos", sa.BigInteger, nullable=False,
                                       server_default="0"))
    op.create_table(
        "turn_usage",
        sa.Column("conversation_id", sa.String(255), nullable=False),
        sa.Column("turn_id", sa.String(255), nullable=False),
        sa.Column("tenant", sa.String(255), nullable=False),
        sa.Column("agent", sa.String(64), nullable=False),
        sa.Column("root_conversation_id", sa.String(255)),
        sa.Column("started_at", Timestamp, nullable=False),
        sa.Column("duration_ms", sa.BigInteger, nullable=False),
        sa.Column("input_tokens", sa.BigInteger, nullable=False),
        sa.Column("output_tokens", sa.BigInteger, nullable=False),
        sa.Column("calls", sa.BigInteger, nullable=False),
        sa.Column("cost_nanos", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", "turn_id", name="pk_turn_usage"),
    )
    op.create_index("ix_turn_usage_started_at", "turn_usage", ["started_at"])


def downgrade() -> None:
    op.drop_index("ix_turn_usage_started_at", table_name="turn_usage")
    op.drop_table("turn_usage")
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("cost_nanos")
