"""Alembic migrations, run in code: `migrate(url_or_engine)` needs no alembic.ini on disk."""
from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine

from agentq.store import dialects, idle_connections
from agentq.store.engine import begin_write, create_engine

SCRIPT_LOCATION = Path(__file__).resolve().parent


def migrate(url_or_engine: str | Engine) -> None:
    """Run `alembic upgrade head` in one transaction; a second run changes nothing."""
    if isinstance(url_or_engine, Engine):
        _upgrade(url_or_engine)
        return
    engine = create_engine(url_or_engine)
    try:
        _upgrade(engine)
    finally:
        idle_connections.dispose(engine)


def _upgrade(engine: Engine) -> None:
    config = Config()
    config.set_main_option("script_location", str(SCRIPT_LOCATION).replace("%", "%%"))
    with begin_write(engine) as conn:
        dialects.of(conn).lock_migrations(conn)
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
