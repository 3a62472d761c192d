"""`agentq check`: verify the invariants of docs/design.md §3 on stored data.

Each check reads the log and the tables and returns violations as sentences; nothing
is written. The log is the truth, so every check starts from it.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from agentq.core import once
from agentq.core.elicitation import question
from agentq.core.events import Event, ToolCallRecord
from agentq.core.fsm import fold
from agentq.core.guardrails import verdicts_once
from agentq.core.handoffs import between_turns
from agentq.core.keys import MODEL_STEP
from agentq.core.render import render, validate
from agentq.core.subagents import AGENT_EXECUTOR, child_conversation_id
from agentq.store import ConversationInfo, Store

# The steps whose failure for good fails their turn, and those failures.
TURN_STEPS = (MODEL_STEP, "compact")
FAILED = ("failed_permanent", "timeout")


@dataclass(frozen=True)
class Violation:
    conversation_id: str
    invariant: str
    message: str

    def __str__(self) -> str:
        return f"{self.conversation_id}: {self.invariant}: {self.message}"


def check_conversation(store: Store, conversation_id: str) -> list[Violation]:
    """Every violation found in one conversation (empty when it is sound)."""
    info = store.conversations.load(conversation_id)
    if info is None:
        return [Violation(conversation_id, "exists", "no such conversation")]
    events = store.log.list_events(conversation_id)
    calls = store.calls.list_of(conversation_id)
    found: list[Violation] = []
    for invariant, message in _all_checks(store, info, events, calls):
        found.append(Violation(conversation_id, invariant, message))
    return found


def _all_checks(store, info, events, calls) -> Iterator[tuple[str, str]]:
    yield from _gap_free_seq(info, events)
    yield from _cache_matches_log(info, events)
    yield from _turn_ordered(events)
    yield from _tool_pairs_whole(events, calls)
    yield from _one_response_per_round(events)
    yield from _context_is_valid(store, info)
    yield from _child_of_its_call(store, info)
    yield from _no_failure_hides(store, info, events)
    yield from verdicts_once(events)


def _no_failure_hides(store: Store, info: ConversationInfo, events: Sequence[Event]
                      ) -> Iterator[tuple[str, str]]:
    """inv. 12: a model or compact step that failed for good failed its turn with an
    `error` event (a tool step's failure is its call's error result instead)."""
    errors = {e.content.get("step_key") for e in events if e.type == "error"}
    for step in store.steps.list_of(info.id):
        if step.kind in TURN_STEPS and step.status in FAILED and step.step_key not in errors:
            yield ("12 no failure hides",
                   f"{step.kind} step {step.step_key} is {step.status} but no error event says so")


def _child_of_its_call(store: Store, info: ConversationInfo) -> Iterator[tuple[str, str]]:
    """inv. 10: a sub-agent's conversation is the one its parent's agent call derives."""
    parent = info.parent
    if parent is None:
        return
    call = store.calls.load(parent.conversation_id, parent.tool_call_id)
    if call is None or call.executor != AGENT_EXECUTOR:
        yield "10 one child per call", f"its parent has no agent call {parent.tool_call_id}"
    elif child_conversation_id(parent.conversation_id, call.id) != info.id:
        yield "10 one child per call", f"the call {call.id} derives another child's id"


def _gap_free_seq(info: ConversationInfo, events: Sequence[Event]) -> Iterator[tuple[str, str]]:
    """inv. 8: seq runs 1, 2, 3 … with no gap and no repeat."""
    for expected, event in enumerate(events, start=1):
        if event.seq != expected:
            yield "8 gap-free seq", f"expected seq {expected}, found {event.seq}"
            return
    if info.next_seq != len(events) + 1:
        yield "8 gap-free seq", f"next_seq is {info.next_seq} but the log holds {len(events)} events"


def _cache_matches_log(info: ConversationInfo, events: Sequence[Event]) -> Iterator[tuple[str, str]]:
    """inv. 1: the cached fsm_state is what folding the log gives."""
    rebuilt = fold(events)
    if rebuilt.to_json() != info.fsm.to_json():
        yield "1 log is the truth", f"fsm_state {info.fsm.to_json()} != rebuilt {rebuilt.to_json()}"


def _turn_ordered(events: Sequence[Event]) -> Iterator[tuple[str, str]]:
    """inv. 2: a user_msg only follows a finished turn (or starts the log)."""
    open_calls: set[str] = set()
    previous: Event | None = None
    for event in events:
        if event.type == "user_msg" and previous is not None and not _turn_over(previous, open_calls):
            yield "2 turn-ordered log", f"user_msg at seq {event.seq} inside a running turn"
        if event.type == "tool_call":
            open_calls.add(event.content["tool_call_id"])
        elif event.type == "tool_result":
            open_calls.discard(event.content["tool_call_id"])
        if between_turns(event):
            continue  # a person's handoff: the turn before it ended
        previous = event


def _turn_over(last: Event, open_calls: set[str]) -> bool:
    if open_calls:
        return False
    if last.type == "assistant_msg":
        return True
    if last.type == "error":
        return True
    # an interrupted turn ends on the cancelled results of its calls
    return last.type == "tool_result" and last.content.get("status") == "cancelled"


def _tool_pairs_whole(events: Sequence[Event], calls: Sequence[ToolCallRecord]) -> Iterator[tuple[str, str]]:
    """inv. 3: each tool_call has at most one result, and one once its turn is over."""
    call_seq: dict[Any, int] = {}
    results: dict[Any, int] = {}  # by the call id the event carries
    for event in events:
        cid = event.content.get("tool_call_id")
        if event.type == "tool_call":
            if cid in call_seq:
                yield "3 tool pairs", f"tool_call {cid} appears twice"
            call_seq[cid] = event.seq
        elif event.type == "tool_result":
            if cid not in call_seq:
                yield "3 tool pairs", f"tool_result {cid} at seq {event.seq} has no call"
            results[cid] = results.get(cid, 0) + 1
    for cid, count in results.items():
        if count > 1:
            yield "3 tool pairs", f"tool call {cid} has {count} results"
    last_user = max((e.seq for e in events if e.type == "user_msg"), default=0)
    for cid, seq in call_seq.items():
        if seq < last_user and cid not in results:
            yield "3 tool pairs", f"tool call {cid} of a finished turn has no result"
    by_id = {c.id: c for c in calls}
    for cid in call_seq:
        record = by_id.get(cid)
        if record is None:
            yield "3 tool pairs", f"tool call {cid} has no tool_calls row"
        elif (cid in results) != (record.status not in ("scheduled", "pending")):
            yield "3 tool pairs", f"tool_calls row {cid} is {record.status} but the log disagrees"


def _one_response_per_round(events: Sequence[Event]) -> Iterator[tuple[str, str]]:
    """inv. 4 and 6: one assistant_msg per round, a round id belongs to one step."""
    seen: dict[str | None, str | None] = {}
    for event in events:
        if event.type != "assistant_msg":
            continue
        if event.round_id in seen:
            yield "4 no re-roll", f"round {event.round_id} has two assistant messages"
        seen[event.round_id] = event.step_key
    for event in events:
        if (event.round_id in seen and event.step_key not in (None, seen[event.round_id])
                and event.type in ("assistant_msg", "tool_call", "suspension")
                and question(event) is None  # a tool server's question: its call's round
                and once.found_in(event) is None):  # a `once` call's unknown run: its call's
            yield "6 round ids", f"seq {event.seq} carries round {event.round_id} of another step"


def _context_is_valid(store: Store, info: ConversationInfo) -> Iterator[tuple[str, str]]:
    """inv. 3: what the next model call would be sent passes validation."""
    view = store.log.load_view(info.id)
    if view is None:
        return
    for problem in validate(render(view)):
        yield "3 valid context", problem


def check_all(store: Store) -> Iterator[Violation]:
    for conversation_id in store.conversations.list_ids(status=None):
        yield from check_conversation(store, conversation_id)
