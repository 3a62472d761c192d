"""What a conversation needs next: `decide(view)`, and `message_action`: what becomes of a new message.

Pure and deterministic: the same view always gives the same decision with the same
step keys (inv. 5), and no wall-clock value enters a key (inv. 7).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentq.core import elicitation, keys, once
from agentq.core.events import FATAL_ERROR_STATUSES, Event, InboxItem, View
from agentq.core.handoffs import between_turns
from agentq.core.keys import StepKind


@dataclass(frozen=True)
class Step:
    """One unit of work, named by its step key (docs/design.md §4)."""

    kind: StepKind
    ref: dict[str, Any]
    key: str
    round_id: str | None

    @classmethod
    def _make(cls, cid: str, kind: StepKind, ref: dict[str, Any]) -> Step:
        key = keys.step_key(cid, kind, ref)
        return cls(kind, ref, key, keys.round_id(key) if kind == keys.MODEL_STEP else None)

    @classmethod
    def model(cls, cid: str, after_seq: int) -> Step:
        return cls._make(cid, keys.MODEL_STEP, {"after_seq": after_seq})

    @classmethod
    def tool(cls, cid: str, tool_call_id: str, answers: int = 0, run: int = 0) -> Step:
        """The call's step; a call run again with a person's `answers` (MCP elicitation),
        or as its `run`-th run once a person said a `once` run did not happen, is a step of
        its own for each."""
        ref: dict[str, Any] = {"tool_call_id": tool_call_id}
        if answers:
            ref["answers"] = answers
        if run:
            ref["run"] = run
        return cls._make(cid, "tool", ref)

    @classmethod
    def expire(cls, cid: str, tool_call_id: str) -> Step:
        return cls._make(cid, "expire", {"tool_call_id": tool_call_id})

    @classmethod
    def child(cls, cid: str, tool_call_id: str) -> Step:
        """Hand the answer of a sub-agent call's child conversation to the call."""
        return cls._make(cid, "child", {"tool_call_id": tool_call_id})

    @classmethod
    def compact(cls, cid: str, to_seq: int) -> Step:
        return cls._make(cid, "compact", {"to_seq": to_seq})


@dataclass(frozen=True)
class Idle:
    """No turn is running and the inbox is empty."""


@dataclass(frozen=True)
class Stopped:
    """The conversation ended or its turn failed; nothing to do until a retry."""

    reason: str


@dataclass(frozen=True)
class StartTurn:
    """The turn is over and a message waits: start a turn with it."""

    item: InboxItem


@dataclass(frozen=True)
class CallModel:
    step: Step


@dataclass(frozen=True)
class RunTools:
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class AwaitInput:
    """Only human/client calls are open; `expiries` are the steps that will close them."""

    expiries: tuple[Step, ...]
    pending: tuple[str, ...]


@dataclass(frozen=True)
class FailTurn:
    """The turn needs another model call but has used its round budget."""

    code: str
    message: str


Decision = Idle | Stopped | StartTurn | CallModel | RunTools | AwaitInput | FailTurn


def current_turn(events: Sequence[Event]) -> tuple[Event, ...]:
    """The events from the last user_msg on; empty if there is none."""
    for index in range(len(events) - 1, -1, -1):
        if events[index].type == "user_msg":
            return tuple(events[index:])
    return ()


def _fatal_error(turn: Sequence[Event]) -> Event | None:
    last = turn[-1] if turn else None
    if last is None or last.type != "error":
        return None
    return last if last.content.get("status") in FATAL_ERROR_STATUSES else None


def _turn_is_over(turn: Sequence[Event]) -> bool:
    """No turn, an interrupted one, or a last model round that made no tool call."""
    if not turn:
        return True
    answers = [e for e in turn if e.type == "assistant_msg"]
    if any(e.content.get("interrupted") for e in answers):
        return True
    if not answers:
        return False
    last_round = answers[-1].round_id
    return not any(e.type == "tool_call" and e.round_id == last_round for e in turn)


def ends_a_turn(events: Sequence[Event], at_seq: int) -> bool:
    """Whether the log up to `at_seq` is whole turns: where a fork may cut (inv. 2, 3).

    `events` must hold the log from before `at_seq` through the event after it, if any.
    """
    if at_seq == 0:
        return True
    following = next((e for e in events if e.seq == at_seq + 1), None)
    if following is not None:
        # inv. 2: a user_msg only follows a whole turn; so does a person's handoff
        return following.type == "user_msg" or between_turns(following)
    turn = current_turn([e for e in events if e.seq <= at_seq])
    return _turn_is_over(turn) or _fatal_error(turn) is not None


def _open_calls(turn: Sequence[Event]) -> list[Event]:
    """The turn's tool_call events without a tool_result, in call order."""
    answered = {e.content["tool_call_id"] for e in turn if e.type == "tool_result"}
    return [e for e in turn if e.type == "tool_call" and e.content["tool_call_id"] not in answered]


def _approved(turn: Sequence[Event]) -> set[str]:
    """The gated calls of the turn that a person approved."""
    return {e.content["tool_call_id"] for e in turn
            if e.type == "resolution" and e.content.get("status") == "approved"}


def _runs_now(call: Event, approved: set[str], turn: Sequence[Event]) -> bool:
    """A server call runs now, unless it waits for a person's approval or for their answer
    to its server's question."""
    if call.content.get("executor", "server") != "server":
        return False
    call_id = call.content["tool_call_id"]
    if call.content.get("needs_approval") and call_id not in approved:
        return False
    if once.waits_in(turn, call_id):  # its run's outcome is unknown: a person says
        return False
    return elicitation.asked(turn, call_id) == elicitation.answered(turn, call_id)


def _run_open_server_calls(
    cid: str, open_calls: Sequence[Event], approved: set[str], turn: Sequence[Event]
) -> RunTools | None:
    server = [e for e in open_calls if _runs_now(e, approved, turn)]
    if not server:
        return None
    return RunTools(tuple(
        Step.tool(cid, e.content["tool_call_id"],
                  elicitation.answered(turn, e.content["tool_call_id"]),
                  once.runs(turn, e.content["tool_call_id"]))
        for e in server))


def _await_pending_calls(
    cid: str, open_calls: Sequence[Event], turn: Sequence[Event]
) -> AwaitInput | None:
    """What is left open once the server calls run: human, client and unapproved calls,
    and server calls whose question waits for an answer."""
    if not open_calls:
        return None
    ids = tuple(e.content["tool_call_id"] for e in open_calls)
    expiries = tuple(
        Step.expire(cid, e.content["tool_call_id"])
        for e in open_calls
        if e.content.get("expires_at") is not None
        or elicitation.asked(turn, e.content["tool_call_id"])
    )
    return AwaitInput(expiries, ids)


def _round_limit(view: View, turn: Sequence[Event]) -> FailTurn | None:
    limit = view.settings.limits.max_rounds_per_turn
    rounds = sum(1 for e in turn if e.type == "assistant_msg")
    if rounds < limit:
        return None
    return FailTurn("round_limit", f"the turn reached max_rounds_per_turn={limit} model rounds")


def decide(view: View) -> Decision:
    """The next thing the conversation needs, as a flat ladder of rules."""
    if view.status == "ended":
        return Stopped("ended")
    turn = current_turn(view.events)
    error = _fatal_error(turn)
    if error is not None:
        return Stopped(f"failed: {error.content.get('code', 'error')}")
    if _turn_is_over(turn):
        return StartTurn(view.inbox[0]) if view.inbox else Idle()
    open_calls = _open_calls(turn)
    # inv. 4: open calls are dispatched or awaited, never re-rolled by a new model call.
    tools = _run_open_server_calls(view.conversation_id, open_calls, _approved(turn), turn)
    if tools is not None:
        return tools
    awaiting = _await_pending_calls(view.conversation_id, open_calls, turn)
    if awaiting is not None:
        return awaiting
    failure = _round_limit(view, turn)
    if failure is not None:
        return failure
    return CallModel(Step.model(view.conversation_id, view.last_seq))


def message_action(state: str, on_busy: str) -> Literal["append", "enqueue", "interrupt", "reject"]:
    """What to do with a new user message (docs/design.md §7, inv. 2)."""
    if state in ("idle", "failed"):
        return "append"
    if state == "ended":
        return "reject"
    if state not in ("running", "awaiting_input"):
        raise ValueError(f"no message can arrive in state {state!r}")
    if on_busy not in ("enqueue", "interrupt", "reject"):
        raise ValueError(f"unknown on_busy {on_busy!r}")
    return on_busy  # type: ignore[return-value]
