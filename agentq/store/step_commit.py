"""The writes that end a step's commit, as one statement on PostgreSQL.

A commit appends first, and the append takes the conversation's lock (inv. 8). What
follows under that lock are plain conditional writes with no decision between them:
finish the step, then close its call, or insert the round's calls and schedule their
steps, or look whether a message waits, and count a model call's tokens in the usage
rollups, the budgets' running totals and its turn's row. PostgreSQL runs them as data-modifying CTEs of
one statement, one round trip, and says how each went; SQLite, in process, runs them one
by one. Either way the caller learns whether the step was still ours, and rolls the
whole commit back if it was not, so a write made beside a lost finish never lands.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Connection, Select, Table, func, select
from sqlalchemy.dialects import postgresql

from agentq.core.events import ToolCallRecord
from agentq.core.token_budgets import meters_of
from agentq.core.usage import Tokens
from agentq.store import dialects
from agentq.store.budget_totals import add_total_rows_txn, adding_rows, total_rows
from agentq.store.calls import (
    CALL_COLUMNS,
    CLOSED_FROM,
    call_values,
    put_calls_txn,
    transition,
    transition_call_txn,
    transition_params,
)
from agentq.store.dialects.postgres import POSTGRES
from agentq.store.engine import parameter_rows, row_parameters
from agentq.store.inbox import MESSAGE_WAITS, inbox_waiting_txn
from agentq.store.ledger import (
    FINISH,
    NewStep,
    finish_params,
    finish_step_txn,
    schedule_step_txn,
    schedule_values,
)
from agentq.store.schema import steps, tool_calls
from agentq.store.turn_usage import TurnRef, turn_values, upsert_turn
from agentq.store.usage import UsageKey, upsert_usage, usage_values


@dataclass(frozen=True)
class Counted:
    """The tokens a model step spent: its usage rollup's parameters (`usage.usage_values`)
    and the budgets' running totals they add to (`budget_totals.total_rows`)."""

    rollup: Mapping[str, Any]
    totals: Sequence[Mapping[str, Any]]
    turn: Mapping[str, Any] | None = None  # its turn's row's (`turn_usage.turn_values`)


Usage = Counted | None  # None: none to count


def counted(key: UsageKey, tokens: Tokens, *, now: datetime, cost_nanos: int = 0,
            turn: TurnRef | None = None) -> Counted:
    """One model call's tokens and cost, for a finish to count in the rollups, the budgets'
    running totals and (if it is of one) its turn's row with it."""
    return Counted(
        usage_values(key, tokens, at=now, cost_nanos=cost_nanos),
        total_rows(key.tenant, meters_of(key.agent, key.conversation_id, now), tokens.total,
                   cost_nanos),
        None if turn is None else turn_values(key, turn, tokens, cost_nanos, at=now))


# At most this many calls (and as many tool steps) are written in the statement that
# finishes the step: one such statement is built and kept per shape, and a round with more
# calls than this is rare enough to pay its extra round trips.
MERGED_ROWS = 16


def finish_closing_call_txn(
    conn: Connection, conversation_id: str, step_key: str, *, worker: str, call_id: str,
    result: Any, now: datetime,
) -> tuple[bool, bool]:
    """Finish our step and move its call from `scheduled` to `done` with `result`:
    (the step was ours, the call was open)."""
    moved = {"to_status": "done", "now": now, "result": result}
    if not dialects.of(conn).one_statement_commit:
        return (finish_step_txn(conn, conversation_id, step_key, worker=worker, now=now),
                transition_call_txn(conn, conversation_id, call_id, from_statuses=CLOSED_FROM,
                                    **moved))
    params = {**finish_params(conversation_id, step_key, worker=worker, now=now),
              **transition_params(conversation_id, call_id, **moved)}
    row = conn.execute(_finish_closing_call(), params).one()
    return row.finished == 1, row.closed == 1


def finish_scheduling_txn(
    conn: Connection, conversation_id: str, step_key: str, *, worker: str,
    calls: Sequence[ToolCallRecord], scheduled: Sequence[NewStep], now: datetime,
    usage: Usage = None,
) -> bool:
    """Finish our step, insert the round's calls and schedule their steps (each insert a
    no-op if the row exists, inv. 5), and count `usage`; whether the step was ours."""
    if not dialects.of(conn).one_statement_commit or max(len(calls), len(scheduled)) > MERGED_ROWS:
        if not finish_step_txn(conn, conversation_id, step_key, worker=worker, now=now):
            return False
        put_calls_txn(conn, calls)
        for step in scheduled:
            schedule_step_txn(conn, step, now=now)
        count_usage_txn(conn, usage)
        return True
    params = {**finish_params(conversation_id, step_key, worker=worker, now=now),
              **row_parameters("call", map(call_values, calls)),
              **row_parameters("step", (schedule_values(step, now=now) for step in scheduled)),
              **usage_params(usage)}
    statement = _finish_scheduling(len(calls), len(scheduled), usage_shape(usage))
    return conn.execute(statement, params).one().finished == 1


def finish_seeing_inbox_txn(
    conn: Connection, conversation_id: str, step_key: str, *, worker: str, now: datetime,
    usage: Usage = None,
) -> tuple[bool, bool]:
    """Finish our step, count `usage` and look whether a message waits: (the step was ours,
    one waits).

    Under the lock no message comes in (posting one takes it), and this statement starts
    after the lock was taken, so it sees every message posted before.
    """
    if not dialects.of(conn).one_statement_commit:
        if not finish_step_txn(conn, conversation_id, step_key, worker=worker, now=now):
            return False, False
        count_usage_txn(conn, usage)
        return True, inbox_waiting_txn(conn, conversation_id)
    params = {**finish_params(conversation_id, step_key, worker=worker, now=now),
              **usage_params(usage)}
    row = conn.execute(_finish_seeing_inbox(usage_shape(usage)), params).one()
    return row.finished == 1, bool(row.waiting)


def count_usage_txn(conn: Connection, usage: Usage) -> None:
    """Count `usage` in the rollups, the budgets' totals and its turn's row, one by one."""
    if usage is not None:
        conn.execute(upsert_usage(dialects.of(conn)), dict(usage.rollup))
        add_total_rows_txn(conn, usage.totals)
        if usage.turn is not None:
            conn.execute(upsert_turn(dialects.of(conn)), dict(usage.turn))


def usage_params(usage: Usage) -> dict[str, Any]:
    if usage is None:
        return {}
    return {**{USAGE_PREFIX + name: v for name, v in usage.rollup.items()},
            **row_parameters(TOTALS_PREFIX, usage.totals),
            **{TURN_PREFIX + name: v for name, v in (usage.turn or {}).items()}}


USAGE_PREFIX = "usage_"
TOTALS_PREFIX = "total"
TURN_PREFIX = "turn_"

# Usage's part of a statement's shape: none (None), or the rollup, how many totals and
# whether a turn's row.
UsageShape = tuple[int, bool] | None


def usage_shape(usage: Usage) -> UsageShape:
    return None if usage is None else (len(usage.totals), usage.turn is not None)


def with_usage(statement: Select[Any], usage: UsageShape, *, where: Any = None) -> Select[Any]:
    """`statement`, adding the usage upsert and the budgets' totals when there is usage to
    count: a data-modifying CTE runs whether or not the rest reads it, and a lost finish
    rolls it back with the whole commit (or, with `where`, writes nothing unless it holds)."""
    if usage is None:
        return statement
    totals, turned = usage
    statement = statement.add_cte(
        upsert_usage(POSTGRES, USAGE_PREFIX, where=where).cte("usage"))
    if totals:
        statement = statement.add_cte(
            adding_rows(totals, TOTALS_PREFIX, where=where).cte("totals"))
    if turned:
        statement = statement.add_cte(upsert_turn(POSTGRES, TURN_PREFIX, where=where).cte("turn"))
    return statement


def _finished() -> Any:
    return FINISH.returning(steps.c.step_key).cte("finished")


def _count(cte: Any) -> Any:
    return select(func.count()).select_from(cte).scalar_subquery()


@cache
def _finish_closing_call() -> Select[Any]:
    finished = _finished()
    closed = (transition(CLOSED_FROM, with_result=True, terminal=True)
              .returning(tool_calls.c.id).cte("closed"))
    return select(_count(finished).label("finished"), _count(closed).label("closed"))


@cache
def _finish_scheduling(calls: int, scheduled: int, usage: UsageShape) -> Select[Any]:
    """One statement per shape (how many calls, how many steps, what usage), built once."""
    statement = select(_count(_finished()).label("finished"))
    return with_usage(with_scheduling(statement, calls, scheduled), usage)


def with_scheduling(statement: Select[Any], calls: int, scheduled: int, *, where: Any = None
                    ) -> Select[Any]:
    """`statement`, adding the inserts of a round's `calls` and its `scheduled` tool steps
    (parameters `call<i>_…`, `step<i>_…`), each a no-op if its row exists (inv. 5), or with
    `where`, unless it holds."""
    if calls:
        statement = statement.add_cte(insert_ignoring_rows(
            tool_calls, CALL_COLUMNS, "call", calls, where=where).cte("calls"))
    if scheduled:
        names = (*(field.name for field in fields(NewStep)), "status", "created_at")
        statement = statement.add_cte(insert_ignoring_rows(
            steps, names, "step", scheduled, where=where).cte("scheduled"))
    return statement


def insert_ignoring_rows(table: Table, names: Sequence[str], prefix: str, count: int, *,
                         where: Any = None) -> Any:
    """`count` rows of parameters `<prefix><i>_<name>`, each a no-op if it exists (inv. 5)
    or unless `where` holds."""
    source = parameter_rows(table, names, prefix, count, where=where)
    return postgresql.insert(table).from_select(list(names), source).on_conflict_do_nothing()


@cache
def _finish_seeing_inbox(usage: UsageShape) -> Select[Any]:
    return with_usage(
        select(_count(_finished()).label("finished"), MESSAGE_WAITS.label("waiting")), usage)
