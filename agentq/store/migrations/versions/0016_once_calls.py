"""Calls of `once` tools: the start mark of a call's current run, committed before the tool
body runs, so that a takeover finds a run that started and never finished
(agentq.core.once).

- `tool_calls.started`: `{"run", "worker", "started_at"}`, and once found unfinished
  `found_at`, `ran_s`, the tool's description and a person's answer. Existing calls never
  started as `once` calls.

Revision ID: 0016
Revises: 0015
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentq.store.column_types import Json

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tool_calls") as batch:
        batch.add_column(sa.Column("started", Json))


def downgrade() -> None:
    with op.batch_alter_table("tool_calls") as batch:
        batch.drop_column("started")
