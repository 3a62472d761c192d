"""People in the loop: calls that wait for a person's approval, and webhooks that tell them.

- `tool_calls.needs_approval`: a server call that runs only once a person approves its
  exact arguments (`@agentq.tool(needs_approval=...)`). Existing calls never did.
- `webhook_endpoints`: tenants' endpoints, their signing secrets sealed (agentq.tenancy.keybox).
- `webhook_deliveries`: the outbox, one row per endpoint and occurrence, written with the
  log event that causes it.

Revision ID: 0006
Revises: 0005
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentq.store.column_types import Json, Timestamp

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tool_calls") as batch:
        batch.add_column(sa.Column("needs_approval", sa.Boolean(), nullable=False,
                                   server_default=sa.text("false")))
    op.create_table(
        "webhook_endpoints",
        sa.Column("id", sa.String(255), primary_key=True),
        sa.Column("tenant", sa.String(255), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("event_types", Json, nullable=False),
        sa.Column("sealed_secret", sa.Text(), nullable=False),
        sa.Column("previous_sealed", sa.Text()),
        sa.Column("previous_until", Timestamp()),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("disabled_reason", sa.Text()),
        sa.Column("failing_since", Timestamp()),
        sa.Column("created_at", Timestamp(), nullable=False),
        sa.Column("updated_at", Timestamp(), nullable=False),
    )
    op.create_index("ix_webhook_endpoints_tenant", "webhook_endpoints", ["tenant"])
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.String(255), primary_key=True),
        sa.Column("endpoint_id", sa.String(255),
                  sa.ForeignKey("webhook_endpoints.id", ondelete="CASCADE",
                                name="fk_webhook_deliveries_endpoint_id_webhook_endpoints"),
                  nullable=False),
        sa.Column("tenant", sa.String(255), nullable=False),
        sa.Column("conversation_id", sa.String(255), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("event_type", sa.String(32), nullable=False),
        sa.Column("ref", Json, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", Timestamp(), nullable=False),
        sa.Column("lease_until", Timestamp()),
        sa.Column("last_status_code", sa.Integer()),
        sa.Column("attempt_log", Json, nullable=False),
        sa.Column("created_at", Timestamp(), nullable=False),
        sa.Column("delivered_at", Timestamp()),
    )
    op.create_index("ix_webhook_deliveries_status_next_attempt_at", "webhook_deliveries",
                    ["status", "next_attempt_at"])
    op.create_index("ix_webhook_deliveries_endpoint_id_created_at", "webhook_deliveries",
                    ["endpoint_id", "created_at"])


def downgrade() -> None:
    op.drop_table("webhook_deliveries")
    op.drop_table("webhook_endpoints")
    with op.batch_alter_table("tool_calls") as batch:
        batch.drop_column("needs_approval")
