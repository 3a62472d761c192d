"""Data migrations: a database written by an older agentq keeps working after `agentq migrate`."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.script import ScriptDirectory

from agentq.core.settings import parse_settings
from agentq.core.token_budgets import EPOCH, WHOLE, Meter, period_start
from agentq.store import Store
from agentq.store.engine import begin_write, create_engine
from agentq.store.migrations import SCRIPT_LOCATION
from agentq.store.column_types import Json, Timestamp

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
OLD_SETTINGS = {
    "hostile": {"provider": "openai", "model": "gpt-4o", "base_url": "http://169.254.169.254/v1",
                "api_key_ref": "AGENTQ_DATABASE_URL", "system": "", "tools": None, "script": None,
                "limits": {"max_rounds_per_turn": 1000, "tool_timeout_s": 86400.0,
                           "llm_timeout_s": 86400.0, "read_timeout_s": 3600.0}},
    "scripted": {"provider": "scripted", "model": "scripted", "script": [
        {"text": "slow", "tool_calls": [], "chunks": 1, "delay_s": 3600.0, "fail": None}]},
}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def at_0001(request: pytest.FixtureRequest, sqlite_url_factory: Callable[..., str]) -> str:
    """An empty database at revision 0001, as the first release left it."""
    url = (sqlite_url_factory(migrated=False) if request.param == "sqlite"
           else request.getfixturevalue("pg_database_factory")())
    engine = create_engine(url)
    config = AlembicConfig()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    with begin_write(engine) as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0001")
    engine.dispose()
    return url


def _insert_old_rows(url: str) -> None:
    engine = create_engine(url)
    meta = sa.MetaData()
    conversations = sa.Table("conversations", meta, sa.Column("id", sa.String), sa.Column("tenant", sa.String),
                             sa.Column("settings", Json), sa.Column("fsm_state", Json),
                             sa.Column("status", sa.String), sa.Column("next_seq", sa.Integer),
                             sa.Column("created_at", Timestamp), sa.Column("updated_at", Timestamp))
    inbox = sa.Table("inbox", meta, sa.Column("id", sa.String), sa.Column("conversation_id", sa.String),
                     sa.Column("content", Json), sa.Column("on_busy", sa.String), sa.Column("scope", Json),
                     sa.Column("queued", sa.Boolean), sa.Column("created_at", Timestamp))
    with begin_write(engine) as conn:
        for cid, settings in OLD_SETTINGS.items():
            conn.execute(conversations.insert().values(
                id=cid, tenant="acme", settings=settings, fsm_state={"state": "idle"}, status="active",
                next_seq=1, created_at=T0, updated_at=T0))
        for item_id, created_at in (("late", T0 + timedelta(seconds=9)), ("early", T0)):
            conn.execute(inbox.insert().values(
                id=item_id, conversation_id="scripted", content={"text": item_id}, on_busy="enqueue",
                scope={}, queued=True, created_at=created_at))
    engine.dispose()


@pytest.fixture
def upgraded(at_0001: str) -> Iterator[Store]:
    """The old rows, after `agentq migrate`."""
    _insert_old_rows(at_0001)
    store = Store.open(at_0001)
    store.migrate()
    yield store
    store.dispose()


def test_old_settings_name_a_profile_lose_their_endpoint_and_come_under_the_ceilings(upgraded):
    hostile = upgraded.conversations.load("hostile").settings
    assert (hostile.profile, hostile.model) == ("openai", "gpt-4o")
    dumped = hostile.model_dump()
    assert "base_url" not in dumped and "api_key_ref" not in dumped
    assert (hostile.limits.max_rounds_per_turn, hostile.limits.llm_timeout_s,
            hostile.limits.tool_timeout_s, hostile.limits.read_timeout_s) == (100, 900.0, 300.0, 900.0)
    scripted = upgraded.conversations.load("scripted").settings
    assert scripted.profile == "scripted" and scripted.script[0].delay_s == 60.0
    parse_settings(dumped)  # what is stored now is what a tenant could send


def test_old_inbox_rows_keep_the_order_they_were_taken_in(upgraded):
    assert [item.id for item in upgraded.log.load_view("scripted").inbox] == ["early", "late"]


def test_conversations_from_before_agents_name_no_agent(upgraded):
    assert upgraded.conversations.load("scripted").agent is None
    assert upgraded.agents.list_latest("acme") == []


def test_the_agents_revision_goes_down_and_up_again_keeping_the_conversations(upgraded):
    config = AlembicConfig()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    before = ScriptDirectory.from_config(config).get_revision("0005").down_revision
    for move, target in ((command.downgrade, before), (command.upgrade, "head")):
        with begin_write(upgraded.engine) as conn:
            config.attributes["connection"] = conn
            move(config, target)
    assert upgraded.conversations.load("scripted").agent is None
    # rows that refer to a conversation stay: nothing recreated the table under them
    assert [item.id for item in upgraded.inbox.list_of("scripted")] == ["early", "late"]


def test_the_budget_totals_start_from_the_rollups_of_the_running_periods(at_0001):
    _insert_old_rows(at_0001)
    config = AlembicConfig()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    engine = create_engine(at_0001)
    with begin_write(engine) as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0009")
    now = datetime.now(timezone.utc)
    rollups = sa.Table("usage_rollups", sa.MetaData(), *(sa.Column(n, sa.String) for n in (
        "tenant", "agent", "profile", "model", "conversation_id")), sa.Column("hour", Timestamp),
        *(sa.Column(n, sa.BigInteger) for n in (
            "input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens", "calls")))
    counts = {"input_tokens": 10, "output_tokens": 5, "cached_tokens": 0, "reasoning_tokens": 0,
              "calls": 1}
    with begin_write(engine) as conn:
        for hour in (period_start("hour", now), datetime(2020, 1, 1, tzinfo=timezone.utc)):
            conn.execute(rollups.insert().values(
                tenant="acme", agent="", profile="scripted", model="", conversation_id="scripted",
                hour=hour, **counts))
    engine.dispose()
    store = Store.open(at_0001)
    store.migrate()
    spent = store.usage.load_spent("scripted")
    store.dispose()
    assert spent.of(Meter("tenant", "", "hour", period_start("hour", now))) == 15  # this hour's
    assert spent.of(Meter("conversation", "scripted", WHOLE, EPOCH)) == 30  # its whole life
