"""Shared fixtures: real PostgreSQL, SQLite and Redis, one test body for every backend; the
API under test with its tenants' keys; worker and beat processes on the real services, on
Redis as the broker, or on RabbitMQ too for the tests parametrized with
`tests.support.brokers.ON_EACH_BROKER`.

A missing service skips its tests locally and fails them when the CI variable is set.
"""
from __future__ import annotations

import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator

import psycopg
import pytest
import redis
from celery import Celery

from agentq.commands import Commands
from agentq.config import Config
from agentq.store import Store, migrate
from agentq.store.schema import metadata
from agentq.tools import Registry
from agentq.worker.factory import create_celery
from tests.support.api import Api
from tests.support.processes import FAST_RECOVERY, ROOT, WorkerProcess, worker_env
from tests.support.unavailable import unavailable
from tests.support.brokers import RABBITMQ_SERVER, add_vhost, delete_vhost

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
def sqlite_store(sqlite_url_factory: Callable[..., str]) -> Iterator[Store]:
    """A store on a fresh SQLite file, for tests that need one backend only."""
    opened = Store.open(sqlite_url_factory())
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


@pytest.fixture(scope="session")
def rabbitmq_url() -> Iterator[str]:
    """A RabbitMQ vhost made for this run (guest may use it), deleted at the end."""
    try:
        vhost = add_vhost()
    except (OSError, subprocess.SubprocessError) as exc:
        unavailable(f"RabbitMQ ({exc})")
    try:
        yield f"{RABBITMQ_SERVER}/{vhost}"
    finally:
        delete_vhost(vhost)


@pytest.fixture
def broker_url(request: pytest.FixtureRequest, redis_url: str) -> str:
    """The broker workers and senders use: the run's Redis db, or with `ON_EACH_BROKER`
    (indirect parametrization) each of "redis" and "rabbitmq" in turn. Pub/sub stays on Redis."""
    kind = getattr(request, "param", "redis")
    return request.getfixturevalue("rabbitmq_url") if kind == "rabbitmq" else redis_url


# the HTTP API, in-process


@pytest.fixture
def api(store: Store) -> Api:
    return Api(store)


@pytest.fixture
def alice(api: Api) -> dict[str, str]:
    """A key of tenant acme, acting for user alice."""
    return api.key("acme", "alice")


@pytest.fixture
def mallory(api: Api) -> dict[str, str]:
    """A valid key of another tenant."""
    return api.key("evil", "mallory")


# worker and beat processes on the real Redis and PostgreSQL


@pytest.fixture
def broker(broker_url: str, redis_url: str) -> Iterator[Celery]:
    """A Celery app that only sends, on the test run's own broker."""
    app = create_celery(Config(broker_url=broker_url, redis_url=redis_url), runtime=lambda: None)
    yield app
    app.close()


@pytest.fixture
def commands(pg_store_clean: Store) -> Commands:
    """Commands on the emptied PostgreSQL store that worker processes share."""
    registry = Registry.from_modules(["agentq.tools.demo", "tests.support.tools_for_tests"])
    return Commands(pg_store_clean, registry)


@pytest.fixture
def workers(tmp_path, pg_url: str, broker_url: str, redis_url: str) -> Iterator[Callable[..., WorkerProcess]]:
    """Start worker processes; every one is killed by pid when the test ends."""
    started: list[WorkerProcess] = []

    def start(name: str = "w1", concurrency: int = 4, queues: str | None = None,
              pool: str = "threads", include: str | None = None,
              **env_extra: str) -> WorkerProcess:
        env = worker_env(pg_url, broker_url, redis_url, **{**FAST_RECOVERY, **env_extra})
        worker = WorkerProcess(env, tmp_path / f"{name}.log", name=name, concurrency=concurrency,
                               queues=queues, pool=pool, include=include)
        started.append(worker.start())
        return worker

    yield start
    for worker in started:
        worker.kill()


@pytest.fixture
def beat(tmp_path, pg_url: str, broker_url: str, redis_url: str) -> Iterator[Callable[[], subprocess.Popen]]:
    """Start one `celery beat` (the sweeper every second); killed by pid at the end."""
    procs: list[subprocess.Popen] = []

    def start(**env_extra: str) -> subprocess.Popen:
        env = worker_env(pg_url, broker_url, redis_url, **{**FAST_RECOVERY, **env_extra})
        log = open(tmp_path / "beat.log", "ab")
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "agentq.worker:app", "beat", "-l", "WARNING",
             "--schedule", str(tmp_path / "beat-schedule")],
            env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        log.close()
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait(timeout=10)
