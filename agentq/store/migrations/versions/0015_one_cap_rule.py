"""One cap rule: `agentq_slots_taken` counts the tenant's taken slots of every kind, or of
some kinds (`p_kinds`), replacing the two functions of 0004 and 0008 that wrote the rule
twice. Its body is `agentq.store.cap_rule.plpgsql_body`, compiled from the rule SQLite runs
inline; tests/store/test_cap_rule.py checks that the installed body still equals it.

Revision ID: 0015
Revises: 0010
"""
from __future__ import annotations

import importlib

from alembic import op

from agentq.store import dialects

revision = "0015"
down_revision = "0010"
branch_labels = None
depends_on = None

# What agentq.store.cap_rule.plpgsql_function() said when this revision was written.
_SLOTS_TAKEN = """
CREATE OR REPLACE FUNCTION agentq_slots_taken(
    p_tenant varchar, p_step_key varchar, p_now timestamptz, p_cap integer, p_lock_key integer,
    p_kinds varchar[]
)
RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    arrival timestamptz;
BEGIN
    PERFORM pg_advisory_xact_lock(1634169969, p_lock_key);
    arrival := coalesce((SELECT steps.created_at
        FROM steps
        WHERE steps.step_key = p_step_key), p_now);
    RETURN (SELECT count(*) AS count_1
        FROM (SELECT 1 AS one
        FROM steps
        WHERE steps.tenant = p_tenant
          AND steps.step_key != p_step_key
          AND (steps.status = 'running'
          AND steps.lease_until >= p_now
          OR steps.status = 'waiting'
          AND (steps.created_at, steps.step_key) < (arrival, p_step_key))
          AND (p_kinds IS NULL
          OR steps.kind = any(p_kinds))
        LIMIT p_cap) AS taken);
END
$$
"""

_VERSIONS = "agentq.store.migrations.versions"
SIGNATURE_TYPES = ("agentq_slots_taken(varchar, varchar, timestamptz, integer, integer, "
                   "varchar[])")
_BY_ARITY = ("agentq_slots_taken(varchar, varchar, timestamptz, integer, integer)",
             "agentq_kind_slots_taken(varchar, varchar, timestamptz, integer, integer, varchar[])")


def upgrade() -> None:
    if dialects.of(op.get_bind()).server_locks:
        for old in _BY_ARITY:
            op.execute(f"DROP FUNCTION {old}")
        op.execute(_SLOTS_TAKEN)


def downgrade() -> None:
    """Back to the two functions, with the text of the revisions that made them."""
    if dialects.of(op.get_bind()).server_locks:
        op.execute(f"DROP FUNCTION {SIGNATURE_TYPES}")
        for revision_module in ("0004_shares", "0008_fairness"):
            old = importlib.import_module(f"{__package__ or _VERSIONS}.{revision_module}")
            op.execute(old._SLOTS_TAKEN if revision_module == "0004_shares"
                       else old._KIND_SLOTS_TAKEN)
