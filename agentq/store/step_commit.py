"""The writes that end a step's commit, as one statement on PostgreSQL.

A commit appends first, and the append takes the conversation's lock (inv. 8). What
follows under that lock are plain conditional writes with no decision between them:
finish the step, then close its call. PostgreSQL runs them as data-modifying CTEs of
one statement, one round trip, and says how each went; SQLite, in process, runs them one
by one. Either way the caller learns whether the step was still ours, and rolls the
whole commit back if it was not, so a write made beside a lost finish never lands.
"""
from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Connection, Select, func, select

from agentq.store.calls import transition, transition_call_txn, transition_params
from agentq.store.ledger import FINISH, finish_params, finish_step_txn
from agentq.store.schema import steps, tool_calls


def finish_closing_call_txn(
    conn: Connection, conversation_id: str, step_key: str, *, worker: str, call_id: str,
    result: Any, now: datetime,
) -> tuple[bool, bool]:
    """Finish our step and move its call from `scheduled` to `done` with `result`:
    (the step was ours, the call was open)."""
    moved = {"from_statuses": ["scheduled"], "to_status": "done", "now": now, "result": result}
    if conn.dialect.name != "postgresql":
        return (finish_step_txn(conn, conversation_id, step_key, worker=worker, now=now),
                transition_call_txn(conn, conversation_id, call_id, **moved))
    params = {**finish_params(conversation_id, step_key, worker=worker, now=now),
              **transition_params(conversation_id, call_id, **moved)}
    row = conn.execute(_finish_closing_call(), params).one()
    return row.finished == 1, row.closed == 1


def _finished() -> Any:
    return FINISH.returning(steps.c.step_key).cte("finished")


def _count(cte: Any) -> Any:
    return select(func.count()).select_from(cte).scalar_subquery()


@cache
def _finish_closing_call() -> Select[Any]:
    finished = _finished()
    closed = transition(with_result=True, terminal=True).returning(tool_calls.c.id).cte("closed")
    return select(_count(finished).label("finished"), _count(closed).label("closed"))
