"""The values of a conversation: events, tool-call records, summaries, inbox items, the view.

Every value is frozen and has an exact JSON round trip (`to_json` / `from_json`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from agentq.core.agent_tools import Parent, child_conversation_id
from agentq.core.agents import AgentRef
from agentq.core.settings import Settings
from agentq.core.timefmt import format_ts, parse_ts, to_utc

EventType = Literal[
    "user_msg", "assistant_msg", "tool_call", "tool_result", "suspension", "resolution", "error",
    "guardrail", "handoff",
]
EVENT_TYPES: tuple[str, ...] = (
    "user_msg", "assistant_msg", "tool_call", "tool_result", "suspension", "resolution", "error",
    "guardrail",  # a guardrail's verdict (agentq.core.guardrails)
    "handoff",  # the agent that holds the conversation from here on (agentq.core.handoffs)
)
# The statuses of an error event that fail its turn (what the fold, the decisions and the
# webhooks read of it; here, so that readers of events need not load the fold).
FATAL_ERROR_STATUSES: tuple[str, ...] = ("failed_permanent", "timeout")
# "agent": a sub-agent's call, answered by its child conversation (agentq.core.subagents)
Executor = Literal["server", "human", "client", "agent"]
CallStatus = Literal[
    "scheduled", "pending", "resolved", "errored", "expired", "cancelled", "done", "rejected"
]
ResultStatus = Literal["ok", "error", "expired", "cancelled", "rejected"]
OnBusy = Literal["enqueue", "interrupt", "reject"]


def _opt_ts(value: datetime | None) -> str | None:
    return None if value is None else format_ts(value)


@dataclass(frozen=True)
class EventDraft:
    """An event before the store gives it an id and a seq."""

    type: EventType
    content: dict[str, Any]
    created_at: datetime
    turn_id: str | None = None
    round_id: str | None = None
    step_key: str | None = None

    def __post_init__(self) -> None:
        if self.type not in EVENT_TYPES:
            raise ValueError(f"unknown event type {self.type!r}")
        object.__setattr__(self, "created_at", to_utc(self.created_at))


@dataclass(frozen=True)
class Event:
    """One immutable row of the log."""

    id: str
    conversation_id: str
    seq: int
    type: EventType
    turn_id: str | None
    round_id: str | None
    step_key: str | None
    content: dict[str, Any]
    created_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "conversation_id": self.conversation_id,
            "seq": self.seq,
            "type": self.type,
            "turn_id": self.turn_id,
            "round_id": self.round_id,
            "step_key": self.step_key,
            "created_at": format_ts(self.created_at),
            "content": self.content,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Event:
        return cls(
            id=data["id"],
            conversation_id=data["conversation_id"],
            seq=int(data["seq"]),
            type=data["type"],
            turn_id=data.get("turn_id"),
            round_id=data.get("round_id"),
            step_key=data.get("step_key"),
            content=data["content"],
            created_at=parse_ts(data["created_at"]),
        )


@dataclass(frozen=True)
class ToolCallRecord:
    """A row of `tool_calls`: the mutable status of one call, beside the immutable log."""

    conversation_id: str
    id: str
    name: str
    executor: Executor
    status: CallStatus
    args: dict[str, Any]
    round_id: str | None
    turn_id: str | None
    created_at: datetime
    result: Any = None
    expires_at: datetime | None = None
    resolved_at: datetime | None = None
    # a server call that runs only once a person approves it (`@tool(needs_approval=...)`)
    needs_approval: bool = False
    # what its server asked a person and their answers (MCP elicitation), None if it never
    # asked: {"asked": n, "answered": m, "question": {...}, "resume": {...}, "answer": {...}}
    elicitation: dict[str, Any] | None = None
    # a `once` tool's call: the start mark of its current run (agentq.core.once), None
    # until it starts
    started: dict[str, Any] | None = None
    # the model's arguments when a person approved the call with edited ones (then in `args`)
    model_args: dict[str, Any] | None = None

    @property
    def answers(self) -> int:
        """How many of its server's questions a person answered: the attempt it is at."""
        return int((self.elicitation or {}).get("answered", 0))

    def to_json(self) -> dict[str, Any]:
        return {
            "tool_call_id": self.id,
            "name": self.name,
            "executor": self.executor,
            "status": self.status,
            "args": self.args,
            "result": self.result,
            "round_id": self.round_id,
            "turn_id": self.turn_id,
            "created_at": format_ts(self.created_at),
            "expires_at": _opt_ts(self.expires_at),
            "resolved_at": _opt_ts(self.resolved_at),
            "needs_approval": self.needs_approval,
            "elicitation": None if self.elicitation is None else self.elicitation.get("question"),
            "model_args": self.model_args,
            **self._child(),
            **self._outcome_unknown(),
        }

    def _outcome_unknown(self) -> dict[str, Any]:
        """A `once` call found started and unfinished: when, where, how long, and any answer."""
        mark = self.started or {}
        if "found_at" not in mark and "answered" not in mark:
            return {}
        return {"outcome_unknown": mark}

    def _child(self) -> dict[str, Any]:
        """A sub-agent call names the child conversation that answers it (derived, inv. 10)."""
        if self.executor != "agent":
            return {}
        return {"child_conversation_id": child_conversation_id(self.conversation_id, self.id)}


@dataclass(frozen=True)
class Summary:
    """A derived record covering events from_seq..to_seq; doubles as a snapshot."""

    id: str
    conversation_id: str
    from_seq: int
    to_seq: int
    content: dict[str, Any]
    version: int
    created_at: datetime


@dataclass(frozen=True)
class InboxItem:
    """A user message that arrived while a turn was running."""

    id: str
    conversation_id: str
    content: dict[str, Any]
    on_busy: OnBusy
    created_at: datetime
    idempotency_key: str | None = None
    scope: dict[str, Any] = field(default_factory=dict)
    request_hash: str | None = None  # what the request said, for Idempotency-Key reuse
    turn_id: str | None = None  # the turn it starts, named when it arrived


@dataclass(frozen=True)
class FsmState:
    """The cached machine state of a conversation; `fold(events)` rebuilds it.

    `pending` maps open human/client calls, and server calls awaiting approval, to
    {executor, name, expires_at} (plus `needs_approval`); `running` lists open server calls
    (an approved call among them); `rounds` counts committed model responses;
    `turn_seq` is the seq of the current turn's user_msg, where a turn's view starts;
    `scope` is who the turn's tools act for: the asker, or the system after an expiry;
    `trace` is the W3C traceparent of the request that started the turn, where its steps'
    spans join it (agentq.telemetry; None while tracing is off);
    `agent` is the agent a handoff gave the conversation to, with the settings it runs with
    (None while the agent it started with holds it; agentq.core.handoffs);
    `unattended` is the rule of a schedule's run that started the turn for every wait for a
    person in it (agentq.core.schedules; None: nobody's run, waits last as their kind says).
    """

    state: Literal["idle", "running", "awaiting_input", "failed"] = "idle"
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)
    running: tuple[str, ...] = ()
    rounds: int = 0
    last_seq: int = 0
    turn_id: str | None = None
    turn_seq: int = 0
    scope: dict[str, Any] | None = None
    trace: str | None = None
    agent: dict[str, Any] | None = None
    unattended: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "state": self.state,
            "pending": self.pending,
            "running": list(self.running),
            "rounds": self.rounds,
            "last_seq": self.last_seq,
            "turn_id": self.turn_id,
            "turn_seq": self.turn_seq,
            "scope": self.scope,
        }
        if self.trace is not None:  # written only when tracing is on: the shape stays
            found["trace"] = self.trace
        if self.agent is not None:  # written only once a handoff happened
            found["agent"] = self.agent
        if self.unattended is not None:  # written only in a turn a schedule's run started
            found["unattended"] = self.unattended
        return found

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> FsmState:
        if not data:
            return cls()
        return cls(
            state=data.get("state", "idle"),
            pending=dict(data.get("pending", {})),
            running=tuple(data.get("running", ())),
            rounds=int(data.get("rounds", 0)),
            last_seq=int(data.get("last_seq", 0)),
            turn_id=data.get("turn_id"),
            turn_seq=int(data.get("turn_seq", 0)),
            scope=data.get("scope"),
            trace=data.get("trace"),
            agent=data.get("agent"),
            unattended=data.get("unattended"),
        )


@dataclass(frozen=True)
class View:
    """What a step loads: latest summary, the events after it, open calls, the inbox.

    The store fills `inbox` only between turns (a message posted during a turn is dealt
    with when it is posted) and `open_calls` only when `fsm` has some.
    """

    conversation_id: str
    settings: Settings
    status: str
    summary: Summary | None
    events: tuple[Event, ...]
    open_calls: tuple[ToolCallRecord, ...] = ()
    inbox: tuple[InboxItem, ...] = ()
    fsm: FsmState = field(default_factory=lambda: FsmState())
    tenant: str = ""  # who owns the conversation: whose share of the workers its steps use
    agent: AgentRef | None = None  # the agent version it was started from
    parent: Parent | None = None  # the call of another conversation it answers, if a child

    @property
    def last_seq(self) -> int:
        if self.events:
            return self.events[-1].seq
        return self.summary.to_seq if self.summary else 0
