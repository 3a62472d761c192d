"""The cap rule is written once: the PL/pgSQL function PostgreSQL runs is the rule SQLite
runs inline, compiled (agentq.store.cap_rule), and the migrations installed that text."""
from __future__ import annotations

import pytest
from sqlalchemy import text

from agentq.store.cap_rule import plpgsql_body
from agentq.store.engine import begin_read
from agentq.store.schema import steps

pytestmark = pytest.mark.postgres


def _installed(engine) -> list[tuple[str, str]]:
    with begin_read(engine) as conn:
        return [tuple(row) for row in conn.execute(text(
            "SELECT proname, prosrc FROM pg_proc WHERE proname LIKE 'agentq%slots_taken'"))]


def test_the_installed_slots_function_is_the_rule_compiled_from_python(pg_store_clean):
    assert _installed(pg_store_clean.engine) == [("agentq_slots_taken", plpgsql_body(steps))]


def test_the_compiled_rule_counts_running_and_earlier_waiting_steps_up_to_the_cap():
    body = plpgsql_body(steps)
    for clause in ("steps.status = 'running'", "steps.lease_until >= p_now",
                   "steps.status = 'waiting'", "< (arrival, p_step_key)", "LIMIT p_cap",
                   "pg_advisory_xact_lock(1634169969, p_lock_key)"):
        assert clause in body
