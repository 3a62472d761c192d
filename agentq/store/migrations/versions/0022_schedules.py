"""Schedules: a tenant's calendars that start conversations or post messages, and one row
per fired slot, whose primary key (schedule, slot) makes each slot fire once.

Revision ID: 0022
Revises: 0015
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentq.store.column_types import Json, Timestamp

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", sa.String(255), primary_key=True),
        sa.Column("tenant", sa.String(255), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("cron", sa.String(255)),
        sa.Column("timezone", sa.String(64)),
        sa.Column("every_s", sa.Float()),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("agent", sa.String(255)),
        sa.Column("conversation_id", sa.String(255)),
        sa.Column("message", Json, nullable=False),
        sa.Column("catch_up", Json, nullable=False),
        sa.Column("approvals", Json, nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("next_at", Timestamp(), nullable=False),
        sa.Column("created_at", Timestamp(), nullable=False),
        sa.Column("updated_at", Timestamp(), nullable=False),
    )
    op.create_index("ix_schedules_tenant_created_at", "schedules", ["tenant", "created_at"])
    op.create_index("ix_schedules_paused_next_at", "schedules", ["paused", "next_at"])
    op.create_table(
        "schedule_runs",
        sa.Column("schedule_id", sa.String(255),
                  sa.ForeignKey("schedules.id", ondelete="CASCADE",
                                name="fk_schedule_runs_schedule_id_schedules"),
                  nullable=False),
        sa.Column("slot_at", Timestamp(), nullable=False),
        sa.Column("tenant", sa.String(255), nullable=False),
        sa.Column("conversation_id", sa.String(255), nullable=False),
        sa.Column("message_id", sa.String(255)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text()),
        sa.Column("created_at", Timestamp(), nullable=False),
        sa.Column("fired_at", Timestamp()),
        sa.PrimaryKeyConstraint("schedule_id", "slot_at", name="pk_schedule_runs"),
    )
    op.create_index("ix_schedule_runs_status_created_at", "schedule_runs",
                    ["status", "created_at"])


def downgrade() -> None:
    op.drop_table("schedule_runs")
    op.drop_table("schedules")
