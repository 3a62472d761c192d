"""Conversation rows: the settings, the cached fsm state, and the `next_seq` that orders the log;
`Conversations` is the store's role that creates and reads them."""
from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, Row, and_, literal_column, or_, select, text, union, update

from agentq.core.agent_tools import Parent
from agentq.core.agents import AgentRef
from agentq.core.events import FsmState
from agentq.core.handoffs import held_settings
from agentq.core.lru import WeightedLRU
from agentq.core.settings import Settings, parse_settings
from agentq.core.timefmt import format_ts
from agentq.core.weight import weight
from agentq.store import dialects
from agentq.store.dialects import Dialect
from agentq.store.engine import begin_read, begin_write, param
from agentq.store.schema import conversations, inbox, steps

STATUSES = ("active", "ended")


@dataclass(frozen=True)
class ConversationInfo:
    """A conversation row, parsed."""

    id: str
    tenant: str
    settings: Settings
    fsm: FsmState
    status: str
    next_seq: int
    created_at: datetime
    updated_at: datetime
    agent: AgentRef | None = None  # the agent version it was started from
    parent: Parent | None = None  # the call of another conversation it answers, if a child

    @property
    def depth(self) -> int:
        return 0 if self.parent is None else self.parent.depth

    @property
    def root_id(self) -> str:
        """The conversation at the top of its tree of sub-agents (itself, if none)."""
        return self.id if self.parent is None else self.parent.root_id

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tenant": self.tenant,
            "status": self.status,
            "agent": None if self.agent is None else self.agent.to_json(),
            "parent": None if self.parent is None else self.parent.to_json(),
            "settings": self.settings.model_dump(mode="json"),
            "fsm_state": self.fsm.to_json(),
            "last_seq": self.next_seq - 1,
            "created_at": format_ts(self.created_at),
            "updated_at": format_ts(self.updated_at),
        }


class _ParsedSettings:
    """Each conversation's settings as last parsed, reused while the stored JSON is equal.

    Why: validating a conversation's settings (a long script, many tools) takes about a
    millisecond and every request and step loads them; the row's settings are read as
    their JSON text (column_types.JsonText), and comparing that text with the one parsed last
    costs next to nothing, where decoding it cost a step about 2% of its CPU. Settings are
    written once, at create (a fork is a new id), and the comparison runs on every load
    anyway, so this hands out what the row holds (Settings are frozen models).

    An LRU of `size` conversations and about `max_bytes` (the stored JSON's weight and
    its decoded form's: the parsed model holds about as much again): a busy process loads
    thousands of conversations an hour, and a long script weighs what it says.
    """

    def __init__(self, size: int, max_bytes: int) -> None:
        self._lock = threading.Lock()
        # the stored JSON, and what it parsed to
        self._by_id: WeightedLRU[str, tuple[Any, Settings]] = WeightedLRU(size, max_bytes)

    def parse(self, conversation_id: str, data: str | dict[str, Any] | None) -> Settings:
        """`data`: the stored JSON's text as read (column_types.JsonText), decoded only if it is
        not the text parsed last; or settings already decoded (a handoff's, from the fsm)."""
        with self._lock:
            known = self._by_id.get(conversation_id)
            if known is not None and known[0][0] == data:
                return known[0][1]
        decoded = json.loads(data) if isinstance(data, str) else data
        settings = parse_settings(decoded)
        with self._lock:  # what is kept, and about what the parsed model holds
            self._by_id.put(conversation_id, (data, settings), weight(data) + weight(decoded))
        return settings

    def __len__(self) -> int:
        return len(self._by_id)

    @property
    def bytes(self) -> int:
        return self._by_id.weight


_PARSED = _ParsedSettings(size=1024, max_bytes=16 * 2**20)


def conversation_from_row(row: Row[Any]) -> ConversationInfo:
    fsm = FsmState.from_json(row.fsm_state)
    return ConversationInfo(
        id=row.id,
        tenant=row.tenant,
        # the agent that holds it runs with its own settings (agentq.core.handoffs)
        settings=_PARSED.parse(row.id, held_settings(fsm) or row.settings),
        fsm=fsm,
        status=row.status,
        next_seq=row.next_seq,
        created_at=row.created_at,
        updated_at=row.updated_at,
        agent=None if row.agent_name is None else AgentRef(row.agent_name, row.agent_version),
        parent=None if row.parent_conversation_id is None else Parent(
            row.parent_conversation_id, row.parent_call_id, row.depth,
            row.root_conversation_id or row.parent_conversation_id),
    )


def insert_conversation_txn(conn: Connection, info: ConversationInfo) -> None:
    conn.execute(conversations.insert().values(**conversation_values(info)))


def conversation_values(info: ConversationInfo) -> dict[str, Any]:
    """The columns of a new conversation's row."""
    return dict(
        id=info.id,
        tenant=info.tenant,
        settings=info.settings.model_dump(mode="json"),
        fsm_state=info.fsm.to_json(),
        status=info.status,
        next_seq=info.next_seq,
        created_at=info.created_at,
        updated_at=info.updated_at,
        agent_name=None if info.agent is None else info.agent.name,
        agent_version=None if info.agent is None else info.agent.version,
        **parent_values(info.parent),
    )


def parent_values(parent: Parent | None) -> dict[str, Any]:
    """The columns that say where a child conversation belongs (all NULL, depth 0, for a root)."""
    if parent is None:
        return {"parent_conversation_id": None, "parent_call_id": None, "depth": 0,
                "root_conversation_id": None}
    return {"parent_conversation_id": parent.conversation_id,
            "parent_call_id": parent.tool_call_id, "depth": parent.depth,
            "root_conversation_id": parent.root_id}


def load_conversation_txn(
    conn: Connection, conversation_id: str, *, lock: bool = False
) -> ConversationInfo | None:
    """The row; with `lock`, held FOR NO KEY UPDATE until the transaction ends.

    NO KEY UPDATE excludes every other writer of the row (inv. 8) but not the
    key-share locks that foreign-key checks take, so inserting a step for this
    conversation in another transaction does not wait for the lock.
    """
    query = _LOCK_ONE if lock else _SELECT_ONE
    row = conn.execute(query, {"conversation_id": conversation_id}).first()
    return None if row is None else conversation_from_row(row)


# Built once: a step runs these every time, and building a statement costs more than
# running it on a warm connection.
_SELECT_ONE = select(conversations).where(conversations.c.id == param(conversations.c.id, "conversation_id"))
_LOCK_ONE = _SELECT_ONE.with_for_update(key_share=True)


def list_conversations_txn(
    conn: Connection,
    *,
    tenant: str | None,
    status: str | None,
    state: str | None,
    after_id: str | None,
    limit: int,
) -> list[ConversationInfo]:
    c = conversations.c
    query = select(conversations).order_by(c.created_at, c.id).limit(limit)
    if tenant is not None:
        query = query.where(c.tenant == tenant)
    if status is not None:
        query = query.where(c.status == status)
    if state is not None:
        query = query.where(c.fsm_state["state"].as_string() == state)
    if after_id is not None:
        cursor = select(c.created_at).where(c.id == after_id).scalar_subquery()
        later = or_(c.created_at > cursor, and_(c.created_at == cursor, c.id > after_id))
        query = query.where(later)
    return [conversation_from_row(row) for row in conn.execute(query)]


def list_children_txn(conn: Connection, parent_ids: list[str]) -> list[ConversationInfo]:
    """The child conversations sub-agent calls of `parent_ids` started, by creation."""
    c = conversations.c
    query = (select(conversations).where(c.parent_conversation_id.in_(parent_ids))
             .order_by(c.created_at, c.id))
    return [conversation_from_row(row) for row in conn.execute(query)]


def list_stalled_conversations_txn(
    conn: Connection, *, updated_before: datetime, now: datetime, limit: int
) -> list[str]:
    """Active conversations with work to do (a running turn, or a waiting inbox) that
    have not moved since `updated_before`: the sweeper re-drives them.

    One whose step runs under a lease still live at `now` is not stalled, only slow (a
    long model call): re-driving it would only find the step taken. If its worker dies,
    the lease runs out and the step is stale (`backlog.list_stale_steps_txn`).
    """
    c = conversations.c
    # Each half reads an index of only the conversations it can find (ix_conversations_running,
    # ix_inbox_untaken), so idle conversations cost it nothing, however many.
    in_turn = select(c.id, c.updated_at).where(
        c.status == literal_column("'active'"), text(dialects.of(conn).running_state),
        c.updated_at < updated_before)
    with_inbox = (
        select(c.id, c.updated_at)
        .join(inbox, and_(inbox.c.conversation_id == c.id, inbox.c.taken_at.is_(None)))
        .where(c.status == "active", c.updated_at < updated_before)
    )
    found = union(in_turn, with_inbox).subquery("found")
    running = (
        select(steps.c.step_key)
        .where(steps.c.conversation_id == found.c.id, steps.c.status == "running",
               steps.c.lease_until >= now)
        .exists()
    )
    query = (
        select(found.c.id)
        .where(~running)
        .order_by(found.c.updated_at, found.c.id)
        .limit(limit)
    )
    return list(conn.execute(query).scalars())


def list_conversation_ids_txn(conn: Connection, *, status: str | None) -> list[str]:
    query = select(conversations.c.id).order_by(conversations.c.created_at, conversations.c.id)
    if status is not None:
        query = query.where(conversations.c.status == status)
    return list(conn.execute(query).scalars())


def move_next_seq_txn(
    conn: Connection, conversation_id: str, *, old_seq: int, new_seq: int, fsm: FsmState,
    now: datetime,
) -> ConversationInfo | None:
    """Move `next_seq` from `old_seq` on, with the cached state; the row as moved, or None.

    None means the log no longer ends before `old_seq`. The UPDATE holds the row's lock
    until the transaction ends (inv. 8), like `SELECT … FOR NO KEY UPDATE`.
    """
    params = move_params(conversation_id, old_seq=old_seq, new_seq=new_seq, fsm=fsm, now=now)
    row = conn.execute(MOVE_NEXT_SEQ, params).first()
    return None if row is None else conversation_from_row(row)


def move_params(
    conversation_id: str, *, old_seq: int, new_seq: int, fsm: FsmState, now: datetime
) -> dict[str, Any]:
    return {"cid": conversation_id, "old_seq": old_seq, "new_seq": new_seq,
            "now": now, "fsm": fsm.to_json()}


# the row moved on from :old_seq, returned as moved (also a part of eventlog's append and of
# `whole_commit`'s statement). No parameter of a statement that updates a table is named as
# one of its columns: SQLAlchemy would set that column to it.
MOVE_NEXT_SEQ = (
    update(conversations)
    .where(
        conversations.c.id == param(conversations.c.id, "cid"),
        conversations.c.next_seq == param(conversations.c.next_seq, "old_seq"),
    )
    .values(
        next_seq=param(conversations.c.next_seq, "new_seq"),
        updated_at=param(conversations.c.updated_at, "now"),
        fsm_state=param(conversations.c.fsm_state, "fsm"),
    )
    .returning(*conversations.c)
)


def set_status_txn(conn: Connection, conversation_id: str, status: str, *, now: datetime) -> None:
    if status not in STATUSES:
        raise ValueError(f"unknown conversation status {status!r}")
    conn.execute(
        update(conversations)
        .where(conversations.c.id == conversation_id)
        .values(status=status, updated_at=now)
    )


class Conversations:
    """Conversation rows: create one, read one, page through them."""

    def __init__(self, engine: Engine, dialect: Dialect) -> None:
        self._engine = engine
        self._dialect = dialect

    def create(
        self, *, tenant: str, settings: Settings, now: datetime, conversation_id: str | None = None,
        agent: AgentRef | None = None,
    ) -> ConversationInfo:
        """A new, active, idle conversation with an empty log (started from `agent`, if given)."""
        info = ConversationInfo(
            id=conversation_id or str(uuid.uuid4()), tenant=tenant, settings=settings,
            fsm=FsmState(), status="active", next_seq=1, created_at=now, updated_at=now,
            agent=agent,
        )
        with begin_write(self._engine) as conn:
            insert_conversation_txn(conn, info)
        return info

    def create_once(
        self, *, tenant: str, settings: Settings, now: datetime, conversation_id: str,
        agent: AgentRef | None = None,
    ) -> bool:
        """`create` under an id derived from what asks for it: False, and nothing written,
        when a conversation of that id exists already (a run that fires twice, inv. 10)."""
        info = ConversationInfo(
            id=conversation_id, tenant=tenant, settings=settings, fsm=FsmState(),
            status="active", next_seq=1, created_at=now, updated_at=now, agent=agent,
        )
        with begin_write(self._engine) as conn:
            done = conn.execute(self._dialect.insert_ignoring(conversations)
                                .values(**conversation_values(info)))
        return done.rowcount == 1

    def load(self, conversation_id: str, *, tenant: str | None = None) -> ConversationInfo | None:
        """The conversation, or None if absent or owned by another `tenant`."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            info = load_conversation_txn(conn, conversation_id)
        if info is None or (tenant is not None and info.tenant != tenant):
            return None
        return info

    def list_page(
        self, *, tenant: str | None = None, status: str | None = None, state: str | None = None,
        after_id: str | None = None, limit: int = 50,
    ) -> list[ConversationInfo]:
        """Conversations ordered by (created_at, id), the page after the one with `after_id`."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return list_conversations_txn(
                conn, tenant=tenant, status=status, state=state, after_id=after_id, limit=limit
            )

    def list_ids(self, *, status: str | None = "active") -> list[str]:
        """Ids of conversations with `status` (every one when None), oldest first."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return list_conversation_ids_txn(conn, status=status)

    def list_descendants(self, conversation_id: str) -> list[ConversationInfo]:
        """The sub-agents' conversations under this one, children before their own, each
        generation in creation order."""
        found: list[ConversationInfo] = []
        generation = [conversation_id]
        with begin_read(self._engine, one_snapshot=False) as conn:
            while generation:
                children = list_children_txn(conn, generation)
                found.extend(children)
                generation = [child.id for child in children]
        return found
