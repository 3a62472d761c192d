"""Alembic environment: migrates on the connection `agentq.store.migrations.migrate` passes in."""
from __future__ import annotations

from alembic import context

import agentq.store.schedule_tables  # noqa: F401  (its tables join the metadata)
import agentq.store.spend_tables  # noqa: F401  (its tables join the metadata)
from agentq.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata)
with context.begin_transaction():
    context.run_migrations()
