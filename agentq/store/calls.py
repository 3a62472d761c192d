"""Tool-call rows: the mutable status of each call, kept beside the immutable log."""
from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Connection, Engine, Row, Update, select, update

from agentq.core.events import ToolCallRecord
from agentq.store.conversations import ConversationInfo, conversation_from_row
from agentq.store.dialects import Dialect
from agentq.store.engine import begin_read, insert_ignoring, one_of, param
from agentq.store.schema import conversations, record_from_row, tool_calls

OPEN_STATUSES = ("scheduled", "pending")
TERMINAL_STATUSES = ("resolved", "errored", "expired", "cancelled", "done")


def call_from_row(row: Row[Any], prefix: str = "") -> ToolCallRecord:
    return record_from_row(ToolCallRecord, row, prefix)


def put_calls_txn(conn: Connection, records: Sequence[ToolCallRecord]) -> None:
    """Insert records; one that exists already is left as it is (inv. 5)."""
    if not records:
        return
    conn.execute(insert_ignoring(conn, tool_calls), [call_values(r) for r in records])


CALL_COLUMNS = ("conversation_id", "id", "name", "executor", "status", "args", "result",
                "round_id", "turn_id", "expires_at", "created_at", "resolved_at", "needs_approval",
                "elicitation", "started", "model_args")


def call_values(record: ToolCallRecord) -> dict[str, Any]:
    """The row that holds `record`."""
    return {name: getattr(record, name) for name in CALL_COLUMNS}


def load_call_txn(conn: Connection, conversation_id: str, call_id: str) -> ToolCallRecord | None:
    row = conn.execute(_LOAD_ONE, {"cid": conversation_id, "call_id": call_id}).first()
    return None if row is None else call_from_row(row)


_LOAD_ONE = select(tool_calls).where(
    tool_calls.c.conversation_id == param(tool_calls.c.conversation_id, "cid"),
    tool_calls.c.id == param(tool_calls.c.id, "call_id"),
)


def load_call_and_conversation_txn(
    conn: Connection, conversation_id: str, call_id: str
) -> tuple[ConversationInfo, ToolCallRecord] | None:
    """A call with its conversation row, in one statement: the two always agree."""
    row = conn.execute(_LOAD_WITH_CONVERSATION, {"cid": conversation_id, "call_id": call_id}).first()
    return None if row is None else (conversation_from_row(row), call_from_row(row, "call_"))


_LOAD_WITH_CONVERSATION = (
    select(conversations, *(column.label("call_" + column.name) for column in tool_calls.c))
    .join(tool_calls, tool_calls.c.conversation_id == conversations.c.id)
    .where(
        conversations.c.id == param(conversations.c.id, "cid"),
        tool_calls.c.id == param(tool_calls.c.id, "call_id"),
    )
)


def list_calls_txn(
    conn: Connection, conversation_id: str, *, statuses: Sequence[str] | None
) -> list[ToolCallRecord]:
    c = tool_calls.c
    query = (
        select(tool_calls)
        .where(c.conversation_id == conversation_id)
        .order_by(c.created_at, c.id)
    )
    if statuses is not None:
        query = query.where(c.status.in_(statuses))
    return [call_from_row(row) for row in conn.execute(query)]


def list_open_calls_txn(conn: Connection, conversation_id: str) -> list[ToolCallRecord]:
    return [call_from_row(row) for row in conn.execute(_LIST_OPEN, {"cid": conversation_id})]


_LIST_OPEN = (
    select(tool_calls)
    .where(
        tool_calls.c.conversation_id == param(tool_calls.c.conversation_id, "cid"),
        tool_calls.c.status.in_(OPEN_STATUSES),
    )
    .order_by(tool_calls.c.created_at, tool_calls.c.id)
)


def transition_call_txn(
    conn: Connection,
    conversation_id: str,
    call_id: str,
    *,
    from_statuses: Sequence[str],
    to_status: str,
    now: datetime,
    result: Any,
) -> bool:
    """Move a call on only from an expected status, so a second resolution changes nothing."""
    params = transition_params(conversation_id, call_id, to_status=to_status, now=now,
                               result=result)
    statement = transition(tuple(from_statuses), with_result=result is not None,
                           terminal=to_status in TERMINAL_STATUSES)
    return _moved(conn, statement, params)


def _moved(conn: Connection, statement: Update, params: dict[str, Any] | None = None) -> bool:
    """Run a conditional UPDATE of one call: whether it moved, False when the call was not
    in a status the UPDATE expects (a race lost, a second resolution)."""
    return conn.execute(statement, params or {}).rowcount == 1


def _from(conversation_id: str, call_id: str, statuses: Sequence[str]) -> Update:
    """The UPDATE of one call that moves it only while it is in one of `statuses`."""
    c = tool_calls.c
    return update(tool_calls).where(c.conversation_id == conversation_id, c.id == call_id,
                                    c.status.in_(statuses))


def transition_params(
    conversation_id: str, call_id: str, *, to_status: str, now: datetime, result: Any,
) -> dict[str, Any]:
    return {"cid": conversation_id, "call_id": call_id, "to": to_status, "result_value": result,
            "now": now}


# A tool step's commit closes its call only from the status its step ran it in.
CLOSED_FROM = ("scheduled",)


@cache
def transition(sources: tuple[str, ...], *, with_result: bool, terminal: bool) -> Update:
    """The conditional UPDATE of `transition_call_txn` (also a part of `step_commit`'s): the
    call moves only from one of `sources` (`one_of`: a statement kept per set of them)."""
    c = tool_calls.c
    values: dict[str, Any] = {"status": param(c.status, "to")}
    if with_result:
        values["result"] = param(c.result, "result_value")
    if terminal:
        values["resolved_at"] = param(c.resolved_at, "now")
    return (
        update(tool_calls)
        .where(
            c.conversation_id == param(c.conversation_id, "cid"),
            c.id == param(c.id, "call_id"),
            one_of(c.status, sources),
        )
        .values(**values)
    )


def list_overdue_calls_txn(conn: Connection, *, now: datetime, limit: int) -> list[ToolCallRecord]:
    c = tool_calls.c
    query = (
        select(tool_calls)
        .where(c.status == "pending", c.expires_at <= now)
        .order_by(c.expires_at, c.conversation_id, c.id)
        .limit(limit)
    )
    return [call_from_row(row) for row in conn.execute(query)]


def ask_txn(
    conn: Connection, conversation_id: str, call_id: str, *, elicitation: dict[str, Any],
    expires_at: datetime,
) -> bool:
    """A scheduled call whose server asked a person something waits for them (`pending`)
    until `expires_at`; False if it was no longer scheduled."""
    return _moved(conn, _from(conversation_id, call_id, ["scheduled"]).values(
        status="pending", elicitation=elicitation, expires_at=expires_at))


def answer_txn(
    conn: Connection, conversation_id: str, call_id: str, *, elicitation: dict[str, Any]
) -> bool:
    """A pending call its person answered runs again (`scheduled`) with `elicitation`
    holding the answer; False if it was no longer pending."""
    return _moved(conn, _from(conversation_id, call_id, ["pending"]).values(
        status="scheduled", elicitation=elicitation))


def mark_started_txn(
    conn: Connection, conversation_id: str, call_id: str, *, started: dict[str, Any],
    statuses: Sequence[str],
) -> bool:
    """Write a `once` call's start mark (agentq.core.once) while it is in one of `statuses`;
    False if it was elsewhere. The caller holds the conversation's lock and read the mark
    it replaces under it."""
    return _moved(conn, _from(conversation_id, call_id, statuses).values(started=started))


def await_outcome_txn(
    conn: Connection, conversation_id: str, call_id: str, *, started: dict[str, Any],
    expires_at: datetime | None = None,
) -> bool:
    """A scheduled `once` call whose run was found unfinished waits for a person (`pending`)
    with its found mark and no deadline (an approval's would expire it), unless a schedule's
    run nobody attends gives it `expires_at`; False if it was no longer scheduled."""
    return _moved(conn, _from(conversation_id, call_id, ["scheduled"]).values(
        status="pending", started=started, expires_at=expires_at))


def approve_edited_txn(
    conn: Connection, conversation_id: str, call_id: str, *, args: dict[str, Any],
    model_args: dict[str, Any],
) -> bool:
    """A pending call a person approved with edited arguments runs (`scheduled`) with theirs;
    the model's stay in `model_args`. False if it was no longer pending."""
    return _moved(conn, _from(conversation_id, call_id, ["pending"]).values(
        status="scheduled", args=args, model_args=model_args))


class Calls:
    """The tool calls of conversations, as a tool step and the API read them."""

    def __init__(self, engine: Engine, dialect: Dialect) -> None:
        self._engine = engine
        self._dialect = dialect

    def list_of(self, conversation_id: str, *, status: str | None = None) -> list[ToolCallRecord]:
        """Calls ordered by (created_at, id), only those with `status` when given."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            statuses = None if status is None else (status,)
            return list_calls_txn(conn, conversation_id, statuses=statuses)

    def load(self, conversation_id: str, call_id: str) -> ToolCallRecord | None:
        with begin_read(self._engine, one_snapshot=False) as conn:
            return load_call_txn(conn, conversation_id, call_id)

    def load_with_conversation(
        self, conversation_id: str, call_id: str
    ) -> tuple[ConversationInfo, ToolCallRecord] | None:
        """A call with its conversation, read together: all a tool step reads."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return load_call_and_conversation_txn(conn, conversation_id, call_id)
