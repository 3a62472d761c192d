"""Safe multi-tenancy: tenants' sealed keys, inbox arrival order, settings that name profiles.

- `tenant_keys`: a tenant's own provider key per profile, sealed (agentq.tenancy.keybox).
- `inbox.arrival`: the order messages arrived in, per conversation; turns start in it,
  never in the order of a client's `created_at`. Existing rows are numbered by
  (created_at, id), the order they were taken in before.
- `inbox.request_hash`: what a message's request said, so an Idempotency-Key reused with
  another body is refused.
- conversation settings: `provider` becomes `profile` (the built-in profiles have the
  old providers' names); `base_url` and `api_key_ref` are dropped, since a tenant may no
  longer choose an endpoint or a key (such a conversation now calls its profile's
  endpoint, the operator's); numbers above the default ceilings come down to them.

Revision ID: 0002
Revises: 0001
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from alembic import op

from agentq.store.column_types import Json, Timestamp

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

BATCH = 1000
# The default ceilings as this revision shipped them (agentq.core.ceilings), frozen here.
_LIMIT_CEILINGS = {"max_rounds_per_turn": 100, "llm_timeout_s": 900.0, "read_timeout_s": 900.0,
                   "tool_timeout_s": 300.0}
_COMPACTION_CEILINGS = {"max_context_tokens": 1_000_000, "max_result_tokens": 1_000_000}
_MAX_TOKENS, _SCRIPTED_DELAY_S = 128_000, 60.0
_BUILTIN = ("scripted", "openai", "anthropic")


def upgrade() -> None:
    op.create_table(
        "tenant_keys",
        sa.Column("tenant", sa.String(255), nullable=False),
        sa.Column("profile", sa.String(255), nullable=False),
        sa.Column("sealed", sa.Text, nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("tenant", "profile"),
    )
    op.add_column("inbox", sa.Column("arrival", sa.Integer, nullable=True))
    op.add_column("inbox", sa.Column("request_hash", sa.String(64), nullable=True))
    op.execute(
        "UPDATE inbox SET arrival = ranked.n FROM ("
        " SELECT id, row_number() OVER (PARTITION BY conversation_id ORDER BY created_at, id) AS n"
        " FROM inbox) AS ranked WHERE ranked.id = inbox.id"
    )
    with op.batch_alter_table("inbox") as batch:
        batch.alter_column("arrival", existing_type=sa.Integer, nullable=False)
    op.create_index(None, "inbox", ["conversation_id", "arrival"], unique=True)
    _rewrite_settings(_upgraded)


def downgrade() -> None:
    _rewrite_settings(_downgraded)
    op.drop_index("ix_inbox_conversation_id_arrival", "inbox")
    with op.batch_alter_table("inbox") as batch:
        batch.drop_column("request_hash")
        batch.drop_column("arrival")
    op.drop_table("tenant_keys")


def _rewrite_settings(change) -> None:
    conn = op.get_bind()
    table = sa.table("conversations", sa.column("id", sa.String), sa.column("settings", Json))
    last = ""
    while True:
        rows = conn.execute(
            sa.select(table.c.id, table.c.settings).where(table.c.id > last)
            .order_by(table.c.id).limit(BATCH)
        ).all()
        for row in rows:
            new = change(dict(row.settings))
            if new != row.settings:
                conn.execute(table.update().where(table.c.id == row.id).values(settings=new))
        if len(rows) < BATCH:
            return
        last = rows[-1].id


def _upgraded(settings: dict[str, Any]) -> dict[str, Any]:
    provider = settings.pop("provider", None)
    settings.setdefault("profile", provider or "scripted")
    settings.pop("base_url", None)
    settings.pop("api_key_ref", None)
    for section, ceilings in (("limits", _LIMIT_CEILINGS), ("compaction", _COMPACTION_CEILINGS)):
        if isinstance(settings.get(section), dict):
            settings[section] = _capped(settings[section], ceilings)
    if isinstance(settings.get("max_tokens"), int):
        settings["max_tokens"] = min(settings["max_tokens"], _MAX_TOKENS)
    script = settings.get("script")
    if isinstance(script, list):
        settings["script"] = [
            {**answer, "delay_s": min(answer["delay_s"], _SCRIPTED_DELAY_S)}
            if isinstance(answer, dict) and isinstance(answer.get("delay_s"), (int, float))
            else answer
            for answer in script
        ]
    return settings


def _capped(section: dict[str, Any], ceilings: Mapping[str, float]) -> dict[str, Any]:
    return {
        key: min(value, ceilings[key]) if key in ceilings and isinstance(value, (int, float)) else value
        for key, value in section.items()
    }


def _downgraded(settings: dict[str, Any]) -> dict[str, Any]:
    profile = settings.pop("profile", "scripted")
    settings["provider"] = profile if profile in _BUILTIN else "openai"
    return settings
