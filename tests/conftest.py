"""Shared fixtures: real PostgreSQL, SQLite and Redis, one test body for every backend.

A missing service skips its tests locally and fails them when the CI variable is set.
"""
from __future__ import annotations

import secrets
import shutil
from collections.abc import Callable, Iterator

import psycopg
import pytest
import redis

from agentq.store import Store, migrate
from agentq.store.schema import metadata
from tests.unavailable import unavailable

PG_SERVER = "postgresql://postgres@127.0.0.1:5432"
REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379
REDIS_CLAIM = "agentq:test-claim"


def _admin(dbname: str = "postgres") -> psycopg.Connection:
    return psycopg.connect(f"{PG_SERVER}/{dbname}", autocommit=True, connect_timeout=3)


@pytest.fixture(scope="session")
def pg_database_factory() -> Iterator[Callable[[], str]]:
    """Makes empty databases `agentq_test_<hex>` on the local server; drops them all at the end."""
    try:
        _admin().close()
    except psycopg.OperationalError as exc:
        unavailable(f"PostgreSQL ({exc})")
    created: list[str] = []

    def make() -> str:
        name = f"agentq_test_{secrets.token_hex(6)}"
        with _admin() as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        created.append(name)
        return f"{PG_SERVER}/{name}"

    yield make
    with _admin() as admin:
        for name in created:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_url(pg_database_factory: Callable[[], str]) -> str:
    """The per-run, migrated PostgreSQL database (shared: `db_url` empties it per test)."""
    url = pg_database_factory()
    migrate(url)
    return url


@pytest.fixture(scope="session")
def sqlite_url_factory(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., str]:
    """Makes a fresh SQLite file URL, migrated unless `migrated=False`."""
    template = tmp_path_factory.mktemp("sqlite-template") / "agentq.db"
    migrate(f"sqlite:///{template}")

    def make(*, migrated: bool = True) -> str:
        path = tmp_path_factory.mktemp("sqlite") / "agentq.db"
        if migrated:
            shutil.copyfile(template, path)
        return f"sqlite:///{path}"

    return make


def _empty_tables(url: str) -> None:
    names = ", ".join(table.name for table in metadata.sorted_tables)
    with _admin(url.rsplit("/", 1)[1]) as conn:
        conn.execute(f"TRUNCATE {names} CASCADE")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, sqlite_url_factory: Callable[..., str]) -> str:
    """A migrated, empty database URL, once per backend."""
    if request.param == "sqlite":
        return sqlite_url_factory()
    url = request.getfixturevalue("pg_url")
    _empty_tables(url)
    return url


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    opened = Store.open(db_url)
    yield opened
    opened.dispose()


@pytest.fixture
def pg_store_clean(pg_url: str) -> Iterator[Store]:
    """A Store on the per-run PostgreSQL database, emptied first (for worker processes)."""
    _empty_tables(pg_url)
    opened = Store.open(pg_url)
    yield opened
    opened.dispose()


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A Redis db (1..15) claimed for this run with SET NX, emptied at the end."""
    token = secrets.token_hex(8)
    for index in range(1, 16):
        client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=index, socket_connect_timeout=2)
        try:
            claimed = client.set(REDIS_CLAIM, token, nx=True, ex=7200)
        except redis.ConnectionError as exc:
            unavailable(f"Redis ({exc})")
        if claimed:
            break
        client.close()
    else:
        unavailable("Redis (every db index 1..15 is claimed)")
    for key in client.scan_iter():
        if key != REDIS_CLAIM.encode():
            client.delete(key)
    yield f"redis://{REDIS_HOST}:{REDIS_PORT}/{index}"
    client.flushdb()
    client.close()
