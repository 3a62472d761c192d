"""Lone statements on PostgreSQL run past SQLAlchemy's Connection and come back as its own would."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy import event, select, update

from agentq.errors import Unavailable
from agentq.store import idle_connections
from agentq.store.engine import begin_read, begin_write, create_engine, param
from agentq.store.lone import LoneConnection, LoneResult
from agentq.store.schema import conversations

pytestmark = pytest.mark.postgres

NOW = datetime(2026, 11, 30, 8, 0, 0, 123456, tzinfo=timezone.utc)
C = conversations.c
ROW = select(conversations).where(C.id == param(C.id))


@pytest.fixture
def engine(pg_store_clean):
    engine = create_engine(str(pg_store_clean.engine.url.render_as_string(hide_password=False)))
    with begin_write(engine) as conn:
        for cid in ("c-1", "c-2"):
            conn.execute(conversations.insert().values(
                id=cid, tenant="t", settings={"model": "m", "nested": {"a": [1, 2]}},
                fsm_state={"state": "idle"}, status="active", next_seq=1,
                created_at=NOW, updated_at=NOW))
    yield engine
    idle_connections.dispose(engine)


def _through_sqlalchemy(engine, statement, params=None):
    with engine.connect() as conn:
        return conn.execute(statement, params or {}).all()


def test_a_lone_read_returns_what_sqlalchemy_returns(engine):
    want = _through_sqlalchemy(engine, ROW, {"id": "c-1"})
    with begin_read(engine, one_snapshot=False) as conn:
        assert isinstance(conn, LoneConnection)
        result = conn.execute(ROW, {"id": "c-1"})
        assert isinstance(result, LoneResult)  # not handed on to SQLAlchemy's Connection
        got = result.all()
    assert [tuple(row) for row in got] == [tuple(row) for row in want]
    row, same = got[0], want[0]
    assert row._mapping == dict(same._mapping)
    assert row.created_at == NOW and row.created_at.tzinfo is not None  # the Timestamp type's
    assert json.loads(row.settings) == {"model": "m", "nested": {"a": [1, 2]}}  # its text
    assert row.fsm_state == {"state": "idle"}


def test_a_statement_built_per_call_is_bound_with_its_own_values(engine):
    with begin_read(engine, one_snapshot=False) as conn:
        for cid in ("c-1", "c-2", "c-3"):
            # a literal value in the statement: the compiled form is shared, the values not
            statement = select(C.id, C.next_seq).where(C.id == cid)
            assert conn.execute(statement).all() == _through_sqlalchemy(engine, statement)


def test_a_lone_write_counts_its_rows_and_returns_what_it_returned(engine):
    moved = update(conversations).where(C.tenant == param(C.tenant, "of")).values(
        next_seq=C.next_seq + 1, updated_at=param(C.updated_at, "now"))
    later = NOW.replace(microsecond=0)
    with begin_write(engine, one_statement=True) as conn:
        assert conn.execute(moved, {"of": "t", "now": later}).rowcount == 2
        row = conn.execute(moved.returning(C.id, C.next_seq, C.updated_at),
                           {"of": "t", "now": later}).first()
    assert row.next_seq == 3 and row.updated_at == later
    # committed at once: autocommit, no transaction around the block
    assert {r.next_seq for r in _through_sqlalchemy(engine, select(C.next_seq))} == {3}


def test_results_answer_as_sqlalchemy_results_do(engine):
    ids = select(C.id).order_by(C.id)
    with begin_read(engine, one_snapshot=False) as conn:
        assert conn.execute(ids).scalars().all() == ["c-1", "c-2"]
        assert conn.scalar(ids) == "c-1"
        assert conn.execute(ids.where(C.id == "none")).first() is None
        assert conn.execute(ids.where(C.id == "c-2")).one().id == "c-2"
        assert conn.execute(ids.where(C.id == "none")).one_or_none() is None
        with pytest.raises(sa.exc.MultipleResultsFound):
            conn.execute(ids).one()
        with pytest.raises(sa.exc.NoResultFound):
            conn.execute(ids.where(C.id == "none")).one()


def test_a_driver_error_is_sqlalchemys_and_the_connection_goes_back_usable(engine):
    duplicate = conversations.insert().values(
        id="c-1", tenant="t", settings={}, fsm_state={}, status="active", next_seq=1,
        created_at=NOW, updated_at=NOW)
    with pytest.raises(sa.exc.IntegrityError), begin_write(engine, one_statement=True) as conn:
        conn.execute(duplicate)
    assert idle_connections.kept(engine) == 0  # not kept: it went back through SQLAlchemy
    with begin_read(engine, one_snapshot=False) as conn:
        assert conn.execute(select(C.id).where(C.id == "c-1")).scalar() == "c-1"
    assert engine.pool.checkedout() == idle_connections.kept(engine) == 1


def test_a_lost_connection_is_unavailable_then_replaced(engine):
    with begin_read(engine, one_snapshot=False) as conn:
        pid = conn.execute(select(sa.func.pg_backend_pid())).scalar()
    with psycopg.connect(engine.url.set(drivername="postgresql").render_as_string(
            hide_password=False), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(Unavailable), begin_read(engine, one_snapshot=False) as conn:
        conn.execute(select(sa.func.pg_backend_pid()))
    # SQLAlchemy's handling invalidated it: the pool opens a new connection
    with begin_read(engine, one_snapshot=False) as conn:
        assert conn.execute(select(sa.func.pg_backend_pid())).scalar() != pid


def test_what_it_does_not_run_itself_goes_through_sqlalchemy(engine):
    with begin_read(engine, one_snapshot=False) as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM conversations").scalar() == 2
        # expanding parameters are rendered per execution: SQLAlchemy's work
        expanding = select(C.id).where(C.id.in_(sa.bindparam("ids", expanding=True)))
        result = conn.execute(expanding, {"ids": ["c-1", "c-2"]})
        assert not isinstance(result, LoneResult)
        assert sorted(result.scalars()) == ["c-1", "c-2"]
        # and so is every statement after, on the same pooled connection
        assert not isinstance(conn.execute(ROW, {"id": "c-1"}), LoneResult)
    assert engine.pool.checkedout() == idle_connections.kept(engine) == 0


def test_statement_listeners_see_every_statement(engine):
    seen = []

    def sent(_conn, _cursor, statement, *_args):
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", sent)
    try:
        with begin_write(engine, one_statement=True) as conn:
            assert not isinstance(conn.execute(ROW, {"id": "c-1"}), LoneResult)
    finally:
        event.remove(engine, "before_cursor_execute", sent)
    assert len(seen) == 1 and "FROM conversations" in seen[0]


def test_parameters_are_bound_as_sqlalchemy_binds_them(engine):
    with begin_read(engine, one_snapshot=False) as conn:
        with pytest.raises(sa.exc.InvalidRequestError, match="bind parameter 'id'"):
            conn.execute(ROW, {})
        # a value in the statement, kept with its compiled form; one computed at each run
        kept = select(C.id).where(C.id == sa.literal("c-2"))
        assert conn.execute(kept).scalar() == conn.execute(kept).scalar() == "c-2"
        computed = select(C.id).where(C.id == sa.bindparam("which", callable_=lambda: "c-1"))
        assert conn.execute(computed).scalar() == "c-1"
        # a parameter named as compiled, and a value in the statement the caller replaces
        assert conn.execute(select(C.id).where(C.id == sa.bindparam("x", "c-2")),
                            {"x": "c-1"}).scalar() == "c-1"


def test_a_listener_removed_hands_statements_back(engine):
    def sent(*_args):
        pass

    event.listen(sa.Engine, "before_cursor_execute", sent)  # every engine's, as some tests do
    try:
        with begin_read(engine, one_snapshot=False) as conn:
            assert not isinstance(conn.execute(ROW, {"id": "c-1"}), LoneResult)
    finally:
        event.remove(sa.Engine, "before_cursor_execute", sent)
    with begin_read(engine, one_snapshot=False) as conn:
        assert isinstance(conn.execute(ROW, {"id": "c-1"}), LoneResult)
