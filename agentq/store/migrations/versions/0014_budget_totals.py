"""Running token totals for budgets: a budget check reads a few rows by primary key instead
of summing a month of rollup rows.

`budget_totals` holds, per tenant, agent and conversation, the tokens of the current hour,
day and month (a conversation's: of its whole life), added to with each model call's
usage rollup (agentq.store.budget_totals). It is filled here from the rollups, for the
periods running now.

Revision ID: 0014
Revises: 0009
"""
from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from agentq.core.token_budgets import EPOCH, PERIODS, WHOLE, period_start
from agentq.store.column_types import Timestamp

revision = "0014"
down_revision = "0009"
branch_labels = None
depends_on = None

ROLLUPS = sa.table(
    "usage_rollups", sa.column("tenant"), sa.column("hour", Timestamp), sa.column("agent"),
    sa.column("conversation_id"), sa.column("input_tokens"), sa.column("output_tokens"),
)


def upgrade() -> None:
    totals = op.create_table(
        "budget_totals",
        sa.Column("tenant", sa.String(255), nullable=False),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("period", sa.String(8), nullable=False),
        sa.Column("period_start", Timestamp, nullable=False),
        sa.Column("tokens", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("tenant", "scope", "name", "period", name="pk_budget_totals"),
    )
    rows = _current_totals(op.get_bind(), datetime.now(UTC))
    if rows:
        op.bulk_insert(totals, rows)


def _current_totals(conn: sa.Connection, now: datetime) -> list[dict]:
    """The totals of the periods running at `now`, summed from the rollups."""
    r = ROLLUPS.c
    tokens = sa.func.sum(r.input_tokens + r.output_tokens)
    rows = []
    for period in PERIODS:
        start = period_start(period, now)
        for tenant, spent in conn.execute(
                sa.select(r.tenant, tokens).where(r.hour >= start).group_by(r.tenant)):
            rows.append(_row(tenant, "tenant", "", period, start, spent))
        for tenant, agent, spent in conn.execute(
                sa.select(r.tenant, r.agent, tokens).where(r.hour >= start, r.agent != "")
                .group_by(r.tenant, r.agent)):
            rows.append(_row(tenant, "agent", agent, period, start, spent))
    for tenant, cid, spent in conn.execute(
            sa.select(r.tenant, r.conversation_id, tokens).group_by(r.tenant, r.conversation_id)):
        rows.append(_row(tenant, "conversation", cid, WHOLE, EPOCH, spent))
    return [row for row in rows if row["tokens"] > 0]


def _row(tenant: str, scope: str, name: str, period: str, start: datetime, spent) -> dict:
    return {"tenant": tenant, "scope": scope, "name": name, "period": period,
            "period_start": start, "tokens": int(spent or 0)}


def downgrade() -> None:
    op.drop_table("budget_totals")
