"""The conversation state machine: `apply` one event, `fold` a log.

The state on the conversation row is only a cache of `fold(log)` (inv. 1), so these
functions are the single definition of what each event does to it.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Literal

from agentq.core.elicitation import ANSWERED
from agentq.core.events import FATAL_ERROR_STATUSES, Event, FsmState
from agentq.core.handoffs import HANDOFF, handed_off
from agentq.core.once import DID_NOT_RUN, OUTCOME_UNKNOWN

# An error event with this status records that a person re-drove a failed turn.
RETRIED = "retried"
# A resolution with this status records that a person approved a gated call: it runs now.
APPROVED = "approved"


def _user_msg(state: FsmState, event: Event) -> FsmState:
    return replace(
        state, state="running", turn_id=event.turn_id, turn_seq=event.seq, pending={}, running=(),
        scope=event.content.get("scope"), trace=event.content.get("traceparent"),
        unattended=event.content.get("unattended"),
    )


def _assistant_msg(state: FsmState, event: Event) -> FsmState:
    # Tentatively idle: a tool_call of the same round, committed with it, makes it running.
    return replace(state, state="idle", rounds=state.rounds + 1)


def _tool_call(state: FsmState, event: Event) -> FsmState:
    content = event.content
    call_id = content["tool_call_id"]
    gated = bool(content.get("needs_approval"))
    if content.get("executor", "server") == "server" and not gated:
        return replace(state, state="running", running=state.running + (call_id,))
    pending = dict(state.pending)
    pending[call_id] = {
        "executor": content.get("executor", "server"),
        "name": content.get("name"),
        "expires_at": content.get("expires_at"),
    }
    if gated:
        pending[call_id]["needs_approval"] = True
    return replace(state, state="running" if state.running else "awaiting_input", pending=pending)


def _tool_result(state: FsmState, event: Event) -> FsmState:
    call_id = event.content["tool_call_id"]
    running = tuple(i for i in state.running if i != call_id)
    pending = {i: p for i, p in state.pending.items() if i != call_id}
    if state.state == "idle":
        # Only an interrupt leaves calls open at idle: its cancelled results end the turn.
        return replace(state, running=running, pending=pending)
    busy: Literal["running", "awaiting_input"] = (
        "running" if running or not pending else "awaiting_input")
    return replace(state, state=busy, running=running, pending=pending)


def _suspension(state: FsmState, event: Event) -> FsmState:
    asked = event.content.get("elicitation")
    if isinstance(asked, dict):
        return _asked(state, asked)
    found = event.content.get(OUTCOME_UNKNOWN)
    if isinstance(found, dict):  # a `once` call's run found unfinished (agentq.core.once)
        return _asked(state, {**found, "expires_at": None}, kind=OUTCOME_UNKNOWN)
    if state.running:
        return state
    return replace(state, state="awaiting_input")


def _asked(state: FsmState, asked: dict, kind: str = "elicitation") -> FsmState:
    """A running server call whose server asked a person something, or whose outcome is
    unknown: it waits for them."""
    call_id = asked.get("tool_call_id")
    if call_id not in state.running:
        return state
    running = tuple(i for i in state.running if i != call_id)
    pending = dict(state.pending)
    pending[call_id] = {"executor": "server", "name": asked.get("name"),
                        "expires_at": asked.get("expires_at"), kind: True}
    return replace(state, state="running" if running else "awaiting_input", running=running,
                   pending=pending)


def _error(state: FsmState, event: Event) -> FsmState:
    status = event.content.get("status")
    if status in FATAL_ERROR_STATUSES:
        return replace(state, state="failed", running=())
    if status == RETRIED and state.state == "failed":
        return replace(state, state="awaiting_input" if state.pending else "running")
    return state


SYSTEM_SCOPE_JSON = {"tenant": "system", "user": None}


def _resolution(state: FsmState, event: Event) -> FsmState:
    # A timeout-driven resolution acts on the system's authority, not the asker's
    # (docs/design.md §16.3).
    if event.content.get("by") == "system":
        return replace(state, scope=SYSTEM_SCOPE_JSON)
    if event.content.get("status") in (APPROVED, ANSWERED, DID_NOT_RUN):
        return _approved(state, event.content["tool_call_id"])
    return state



def _approved(state: FsmState, call_id: str) -> FsmState:
    """An approved call (or one whose server's question was answered) stops waiting on a
    person and runs like any server call."""
    if call_id not in state.pending:
        return state
    pending = {i: p for i, p in state.pending.items() if i != call_id}
    return replace(state, state="running", pending=pending, running=state.running + (call_id,))


_RULES: dict[str, Callable[[FsmState, Event], FsmState]] = {
    "user_msg": _user_msg,
    "assistant_msg": _assistant_msg,
    "tool_call": _tool_call,
    "tool_result": _tool_result,
    "suspension": _suspension,
    "resolution": _resolution,
    "error": _error,
    # a verdict changes nothing: a trip is the error event committed with it
    "guardrail": lambda state, event: state,
    HANDOFF: handed_off,
}


def apply(state: FsmState, event: Event) -> FsmState:
    """The state after one more event; every event moves `last_seq`."""
    return replace(_RULES[event.type](state, event), last_seq=event.seq)


def fold(events: Iterable[Event], initial: FsmState = FsmState()) -> FsmState:
    """The state after a whole log (or a batch of it, from a cached `initial`)."""
    state = initial
    for event in events:
        state = apply(state, event)
    return state


def round_closed(state: FsmState) -> bool:
    """Every call of the round has its result: the model speaks next.

    Whoever commits that last result (a tool step, an expiry, a resolution) asks for the
    next model call; the others leave it, so one round leads to one advance.
    """
    return state.state == "running" and not state.running and not state.pending
