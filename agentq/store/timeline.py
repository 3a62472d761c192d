"""Reads for seeing a run: what a turn's timeline is drawn from, and a conversation's tree of
sub-agents with the tokens each spent.

Each read is a fixed number of statements in one snapshot, however many steps the turn
took or children the tree has: a turn is its conversation, its events, its calls joined to
their children, and its steps read by key (`agentq.core.timeline.step_keys_of`); a tree is
its conversation and every conversation under the same root joined to its token totals.
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, Engine, and_, func, or_, select

from agentq.core.events import Event, ToolCallRecord
from agentq.core.timeline import ChildRow, StepRow, step_keys_of
from agentq.store.calls import call_from_row
from agentq.store.conversations import ConversationInfo, conversation_from_row, load_conversation_txn
from agentq.store.dialects import Dialect
from agentq.store.engine import begin_read
from agentq.store.eventlog import event_from_row
from agentq.store.schema import conversations, events, steps, tool_calls
from agentq.store.spend_tables import usage_rollups

_CHILD = "child_"


@dataclass(frozen=True)
class TurnRecords:
    """What the store holds of one turn."""

    conversation: ConversationInfo
    events: list[Event]
    calls: list[ToolCallRecord]
    children: list[ChildRow]
    steps: list[StepRow]

    @property
    def running(self) -> bool:
        """The conversation is in this turn still (running, or waiting on a person)."""
        fsm = self.conversation.fsm
        return fsm.turn_id == self.events[0].turn_id and fsm.state in ("running", "awaiting_input")


@dataclass(frozen=True)
class TreeNode:
    """One conversation of a tree, with the tokens it spent (its own, not its children's)."""

    conversation: ConversationInfo
    input_tokens: int
    output_tokens: int
    calls: int
    cost_nanos: int = 0  # what its model calls cost at the prices in force (agentq.core.prices)


class Timelines:
    """A turn's records and a conversation's tree, each read in a fixed number of statements."""

    def __init__(self, engine: Engine, dialect: Dialect) -> None:
        self._engine = engine
        self._dialect = dialect

    def load_turn(self, conversation_id: str, turn_id: str, *, tenant: str | None = None
                  ) -> TurnRecords | None:
        """The turn's records; None if the conversation or the turn is not there, or the
        conversation is another `tenant`'s."""
        with begin_read(self._engine) as conn:
            info = load_conversation_txn(conn, conversation_id)
            if info is None or (tenant is not None and info.tenant != tenant):
                return None
            turn = _turn_events_txn(conn, conversation_id, turn_id)
            if not turn:
                return None
            calls, children = _turn_calls_txn(conn, conversation_id, turn_id)
            keys = step_keys_of(conversation_id, turn, calls)
            return TurnRecords(info, turn, calls, children, _steps_txn(conn, keys))

    def load_tree(self, conversation_id: str, *, tenant: str | None = None
                  ) -> list[TreeNode] | None:
        """The conversation and every conversation under it, parents before children; None if
        it is not there or is another `tenant`'s."""
        with begin_read(self._engine) as conn:
            info = load_conversation_txn(conn, conversation_id)
            if info is None or (tenant is not None and info.tenant != tenant):
                return None
            nodes = _tree_txn(conn, info.root_id, tenant=info.tenant)
        return _under(nodes, conversation_id)


def _turn_events_txn(conn: Connection, conversation_id: str, turn_id: str) -> list[Event]:
    c = events.c
    rows = conn.execute(select(events).where(c.conversation_id == conversation_id,
                                             c.turn_id == turn_id).order_by(c.seq))
    return [event_from_row(row) for row in rows]


def _turn_calls_txn(conn: Connection, conversation_id: str, turn_id: str
                    ) -> tuple[list[ToolCallRecord], list[ChildRow]]:
    """The turn's calls, each beside the child conversation that answers it, if any."""
    call, child = tool_calls.c, conversations.alias("child")
    joined = tool_calls.outerjoin(child, and_(child.c.parent_conversation_id == conversation_id,
                                              child.c.parent_call_id == call.id))
    rows = conn.execute(
        select(tool_calls, child.c.id.label(_CHILD + "id"),
               child.c.fsm_state.label(_CHILD + "fsm_state"),
               child.c.status.label(_CHILD + "status"),
               child.c.agent_name.label(_CHILD + "agent"))
        .select_from(joined)
        .where(call.conversation_id == conversation_id, call.turn_id == turn_id)
        .order_by(call.created_at, call.id)).all()
    children = [ChildRow(row.child_id, row.id, (row.child_fsm_state or {}).get("state", "idle"),
                         row.child_status, row.child_agent)
                for row in rows if row.child_id is not None]
    return [call_from_row(row) for row in rows], children


def _steps_txn(conn: Connection, keys: list[str]) -> list[StepRow]:
    if not keys:
        return []
    c = steps.c
    rows = conn.execute(select(steps).where(c.step_key.in_(keys)).order_by(c.created_at))
    return [StepRow(
        step_key=row.step_key, kind=row.kind, ref=row.ref, status=row.status,
        attempts=row.attempts, retries=row.retries, faults=row.faults, deaths=row.deaths,
        worker=row.worker, lease_until=row.lease_until, last_error=row.last_error,
        created_at=row.created_at, started_at=row.started_at, finished_at=row.finished_at,
        round_id=row.round_id, attempt_log=row.attempt_log or (),
    ) for row in rows]


def _tree_txn(conn: Connection, root_id: str, *, tenant: str) -> list[TreeNode]:
    """The root and every conversation under it, each joined to its token totals."""
    u = usage_rollups.c
    spent = (select(u.conversation_id,
                    func.sum(u.input_tokens).label("input_tokens"),
                    func.sum(u.output_tokens).label("output_tokens"),
                    func.sum(u.calls).label("calls"),
                    func.sum(u.cost_nanos).label("cost_nanos"))
             .where(u.tenant == tenant,
                    or_(u.root_conversation_id == root_id, u.conversation_id == root_id))
             .group_by(u.conversation_id).subquery("spent"))
    conv = conversations.c
    rows = conn.execute(
        select(conversations, spent.c.input_tokens, spent.c.output_tokens, spent.c.calls,
               spent.c.cost_nanos)
        .select_from(conversations.outerjoin(spent, spent.c.conversation_id == conv.id))
        .where(conv.tenant == tenant,
               or_(conv.id == root_id, conv.root_conversation_id == root_id,
                   conv.parent_conversation_id == root_id))
        .order_by(conv.depth, conv.created_at, conv.id))
    return [TreeNode(conversation_from_row(row), int(row.input_tokens or 0),
                     int(row.output_tokens or 0), int(row.calls or 0), int(row.cost_nanos or 0))
            for row in rows]


def _under(nodes: list[TreeNode], top: str) -> list[TreeNode]:
    """The nodes at or under `top`, parents before children (the rows come by depth)."""
    kept: set[str] = {top}
    found = []
    for node in nodes:
        parent = node.conversation.parent
        if node.conversation.id == top or (parent is not None and parent.conversation_id in kept):
            kept.add(node.conversation.id)
            found.append(node)
    return found
