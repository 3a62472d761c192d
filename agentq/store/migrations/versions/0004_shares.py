"""A fair share of the workers: each step row names its tenant, and a capped step can wait.

- `steps.tenant`: the tenant of the step's conversation, so a claim counts the steps of
  one tenant without a join. Existing rows take their conversation's tenant.
- `ix_steps_tenant_busy`: that tenant's running and waiting steps by arrival, the rows a
  capped claim counts (partial: finished rows, most of the table, are not in it).
- `agentq_slots_taken` (PostgreSQL): the count a capped claim makes, under the tenant's
  advisory lock and in a snapshot taken after it (agentq.store.ledger._slots_taken says
  why); SQLite counts in the claim itself.
- The new step status `waiting` (a step refused a slot by its tenant's cap) needs no
  schema change: `status` is free text.

Revision ID: 0004
Revises: 0003
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentq.store import dialects

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_BUSY = "status IN ('running', 'waiting')"

# A volatile PL/pgSQL function: each statement in it sees a fresh snapshot, so the count,
# made after the lock is granted, sees every claim that held the lock before this one.
# The lock lasts until the claim's transaction ends; its first key is "agtq".
_SLOTS_TAKEN = """
CREATE FUNCTION agentq_slots_taken(
    p_tenant varchar, p_step_key varchar, p_now timestamptz, p_cap integer, p_lock_key integer
) RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    arrival timestamptz;
BEGIN
    PERFORM pg_advisory_xact_lock(1634169969, p_lock_key);
    arrival := COALESCE((SELECT created_at FROM steps WHERE step_key = p_step_key), p_now);
    RETURN (SELECT count(*) FROM (
        SELECT 1 FROM steps
        WHERE tenant = p_tenant AND step_key <> p_step_key
          AND ((status = 'running' AND lease_until >= p_now)
               OR (status = 'waiting' AND (created_at, step_key) < (arrival, p_step_key)))
        LIMIT p_cap) AS taken);
END
$$
"""


def upgrade() -> None:
    op.add_column("steps", sa.Column("tenant", sa.String(255), nullable=True))
    op.execute(
        "UPDATE steps SET tenant = (SELECT tenant FROM conversations"
        " WHERE conversations.id = steps.conversation_id)"
    )
    with op.batch_alter_table("steps") as batch:
        batch.alter_column("tenant", existing_type=sa.String(255), nullable=False)
    op.create_index("ix_steps_tenant_busy", "steps", ["tenant", "status", "created_at"],
                    postgresql_where=sa.text(_BUSY), sqlite_where=sa.text(_BUSY))
    if dialects.of(op.get_bind()).server_locks:
        op.execute(_SLOTS_TAKEN)


def downgrade() -> None:
    # A step left waiting runs again as soon as a worker takes it, as before the caps.
    op.execute("UPDATE steps SET status = 'scheduled' WHERE status = 'waiting'")
    if dialects.of(op.get_bind()).server_locks:
        op.execute("DROP FUNCTION agentq_slots_taken")
    op.drop_index("ix_steps_tenant_busy", "steps")
    with op.batch_alter_table("steps") as batch:
        batch.drop_column("tenant")
