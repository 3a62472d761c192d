"""Blame and fair shares: only a step's own faults count against it, and the slots workers
offer are known where steps are claimed.

- `steps.faults`: attempts that can be the step's own fault (it raised, or its worker died
  while it ran alone); a step is given up after AGENTQ_MAX_ATTEMPTS of them.
- `steps.deaths`: attempts whose worker died under it and other steps at once; after
  two, the step runs alone (`agentq.store.ledger`).
- `worker_slots`: the slots each live worker process offers per queue, renewed while it
  runs; a tenant's default share of a queue derives from their sum (`agentq.store.slots`).
- `agentq_kind_slots_taken` (PostgreSQL): `agentq_slots_taken` (0004) counting only the
  tenant's steps of some kinds, those of one queue, for that queue's default share.

Existing rows count their past attempts as faults, as they did before.

Revision ID: 0008
Revises: 0006
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentq.store import dialects
from agentq.store.column_types import Timestamp

revision = "0008"
down_revision = "0006"
branch_labels = None
depends_on = None


_KIND_SLOTS_TAKEN = """
CREATE FUNCTION agentq_kind_slots_taken(
    p_tenant varchar, p_step_key varchar, p_now timestamptz, p_cap integer, p_lock_key integer,
    p_kinds varchar[]
) RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    arrival timestamptz;
BEGIN
    PERFORM pg_advisory_xact_lock(1634169969, p_lock_key);
    arrival := COALESCE((SELECT created_at FROM steps WHERE step_key = p_step_key), p_now);
    RETURN (SELECT count(*) FROM (
        SELECT 1 FROM steps
        WHERE tenant = p_tenant AND step_key <> p_step_key AND kind = ANY(p_kinds)
          AND ((status = 'running' AND lease_until >= p_now)
               OR (status = 'waiting' AND (created_at, step_key) < (arrival, p_step_key)))
        LIMIT p_cap) AS taken);
END
$$
"""


def upgrade() -> None:
    with op.batch_alter_table("steps") as batch:
        batch.add_column(sa.Column("faults", sa.Integer, nullable=False, server_default="0"))
        batch.add_column(sa.Column("deaths", sa.Integer, nullable=False, server_default="0"))
    op.execute("UPDATE steps SET faults = attempts")
    op.create_table(
        "worker_slots",
        sa.Column("worker", sa.String(255), primary_key=True),
        sa.Column("queue", sa.String(255), primary_key=True),
        sa.Column("slots", sa.Integer, nullable=False),
        sa.Column("expires_at", Timestamp, nullable=False),
    )
    if dialects.of(op.get_bind()).server_locks:
        op.execute(_KIND_SLOTS_TAKEN)


def downgrade() -> None:
    if dialects.of(op.get_bind()).server_locks:
        op.execute("DROP FUNCTION agentq_kind_slots_taken")
    op.drop_table("worker_slots")
    with op.batch_alter_table("steps") as batch:
        batch.drop_column("deaths")
        batch.drop_column("faults")
