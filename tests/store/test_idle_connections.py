"""Connections lone statements leave idle are kept for the process's next statement, and
nothing the pool promised is lost by it (agentq.store.idle_connections)."""
from __future__ import annotations

import gc
import os
import threading

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy import select

from agentq.store import idle_connections
from agentq.store.dialects import postgres
from agentq.store.engine import begin_read, begin_write, create_engine

pytestmark = pytest.mark.postgres

PID = select(sa.func.pg_backend_pid())


@pytest.fixture
def engine(pg_url):
    engine = create_engine(pg_url, pool_size=1)
    engine.pool._timeout = 2  # a checkout that waits on the pool fails the test soon
    yield engine
    idle_connections.dispose(engine)


def _backend(engine, *, lone: bool = True) -> int:
    if lone:
        with begin_read(engine, one_snapshot=False) as conn:
            return conn.execute(PID).scalar()
    with begin_write(engine) as conn:
        return conn.execute(PID).scalar()


def test_the_next_lone_statement_runs_on_the_connection_the_last_one_left(engine):
    first = _backend(engine)
    assert idle_connections.kept(engine) == 1
    assert engine.pool.checkedout() == 1 and engine.pool.checkedin() == 0  # kept out of it
    assert _backend(engine) == first
    assert idle_connections.kept(engine) == 1


def test_a_transaction_takes_the_kept_connection_instead_of_waiting_on_the_pool(engine):
    first = _backend(engine)  # the pool's only connection is kept
    assert _backend(engine, lone=False) == first  # a pool of one: no wait, no second
    assert idle_connections.kept(engine) == 0  # the transaction gave it back to the pool
    assert engine.pool.checkedin() == 1
    with begin_write(engine) as conn:  # and it is a transaction as before
        assert conn.execute(sa.text("SELECT current_setting('transaction_isolation')")
                            ).scalar() == "read committed"
        assert not conn.connection.driver_connection.autocommit


def test_one_a_caller_waits_for_in_the_pool_goes_back_to_the_pool(engine):
    """A statement that found nothing kept waits in the pool: the connection it waits for is
    not kept away from it when the statement holding it ends."""
    started, answers = threading.Event(), []

    def slow() -> None:
        with begin_read(engine, one_snapshot=False) as conn:
            started.set()
            answers.append(conn.execute(select(sa.func.pg_sleep(0.5))).scalar())

    holder = threading.Thread(target=slow)
    holder.start()
    started.wait(timeout=5)
    answers.append(_backend(engine))  # waits in the pool (of one) until `slow` ends
    holder.join(timeout=10)
    assert len(answers) == 2  # no Unavailable after the pool's timeout
    assert idle_connections.kept(engine) == 1  # kept again once nobody waited


def test_threads_sharing_a_small_pool_all_get_one_and_the_counts_agree(pg_url):
    engine = create_engine(pg_url, pool_size=2)
    engine.pool._timeout = 2
    failed: list[BaseException] = []

    def statements() -> None:
        try:
            for _ in range(30):
                _backend(engine)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failed.append(exc)

    threads = [threading.Thread(target=statements) for _ in range(16)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert failed == [] and not any(thread.is_alive() for thread in threads)
        assert engine.pool.checkedout() == idle_connections.kept(engine) <= 2
    finally:
        idle_connections.dispose(engine)


def test_a_connection_left_failed_or_in_a_transaction_is_not_kept(engine):
    with pytest.raises(sa.exc.ProgrammingError), begin_write(engine, one_statement=True) as conn:
        conn.execute(select(sa.column("x")).select_from(sa.table("no_such_table")))
    assert idle_connections.kept(engine) == 0 and engine.pool.checkedin() == 1
    pooled = engine.raw_connection()
    pooled.driver_connection.execute("BEGIN")  # left inside a transaction
    idle_connections.keep(engine, pooled)
    assert idle_connections.kept(engine) == 0 and engine.pool.checkedin() == 1


def test_one_kept_past_the_ping_age_goes_back_to_the_pool_and_is_checked(engine, monkeypatch):
    dead = _backend(engine)
    with psycopg.connect(engine.url.set(drivername="postgresql").render_as_string(
            hide_password=False), autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (dead,)).fetchone()[0]
    monkeypatch.setattr(postgres, "PING_AFTER_IDLE_S", 0.0)
    # not handed out as it is: the pool's ping finds it dead and opens another
    assert _backend(engine) != dead


def test_a_forked_process_neither_uses_nor_closes_its_parents(engine):
    parent = _backend(engine)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        code = 1
        try:
            assert idle_connections.kept(engine) == 0  # its copy of the parent's is not its own
            gc.collect()
            # nor back in its pool, to be handed out on the parent's session (or closed)
            assert engine.pool.checkedin() == 0
            engine.dispose(close=False)  # a child's pool starts afresh, as SQLAlchemy asks
            os.write(write, str(_backend(engine)).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        seen = int(pipe.read() or 0)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert seen not in (0, parent)
    assert _backend(engine) == parent  # the parent's session is still its own, and works


def test_dispose_closes_the_kept_ones_too(engine):
    pid = _backend(engine)
    pool = engine.pool
    idle_connections.dispose(engine)
    assert idle_connections.kept(engine) == 0 and pool.checkedout() == 0
    with psycopg.connect(engine.url.set(drivername="postgresql").render_as_string(
            hide_password=False), autocommit=True) as admin:
        assert admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                             (pid,)).fetchone()[0] == 0


def test_a_server_out_of_reach_is_unavailable_to_a_lone_statement_and_a_transaction(pg_url):
    from agentq.errors import Unavailable

    unreachable = create_engine(sa.make_url(pg_url).set(port=1).render_as_string(
        hide_password=False))
    try:
        for opened in (lambda: begin_read(unreachable, one_snapshot=False),
                       lambda: begin_write(unreachable)):
            with pytest.raises(Unavailable) as raised, opened():
                pass
            assert raised.value.code == "database_unavailable"  # the driver's error, wrapped
    finally:
        idle_connections.dispose(unreachable)
