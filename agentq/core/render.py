"""Rendering a view into the neutral request, and the pairing contract it must meet.

inv. 3: every tool call sent to a provider is answered by exactly one result. `render`
pairs calls with results by id (whatever order the log holds them in), `validate`
states the contract, and `repair` closes any gap with a recorded synthetic answer.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace
from typing import Any

from agentq.core.budget_asks import is_budget_call
from agentq.core.edits import edit_note
from agentq.core.events import Event, View
from agentq.core.reasoning import reasoning_of
from agentq.core.request import CallRef, Message, Request, ToolSpec
from agentq.core.wire import check_anthropic, check_openai, to_anthropic, to_openai

__all__ = [
    "render", "validate", "repair", "output_text",
    "to_openai", "to_anthropic", "check_openai", "check_anthropic",
]

SUMMARY_PREFIX = "Summary of the conversation so far:\n"
MISSING_RESULT_TEXT = "[cancelled] no result was recorded for this call"
EMPTY_USER_TEXT = "[empty message]"
LEADING_USER_TEXT = "[the conversation starts here]"
_CLOSED_WITHOUT_OUTPUT = {
    "expired": "no answer arrived before the call expired",
    "cancelled": "the call was cancelled before it returned",
    "error": "the call failed",
}


def output_text(output: Any) -> str:
    """A tool output as text: strings as they are, anything else as sorted JSON."""
    return output if isinstance(output, str) else json.dumps(output, sort_keys=True)


def _result_message(result: Event, edited: dict[str, Any] | None = None) -> Message:
    """A result as the model reads it; led by a note when a person edited its arguments."""
    status = result.content.get("status", "ok")
    output = result.content.get("output")
    parts = tuple(p for p in result.content.get("parts") or () if isinstance(p, dict))
    note = "" if edited is None else edit_note(edited) + "\n"
    if status == "ok":
        return Message("tool", note + output_text(output),
                       tool_call_id=result.content["tool_call_id"], parts=parts, status=status)
    body = _CLOSED_WITHOUT_OUTPUT.get(status, status) if output is None else output_text(output)
    text = f"{note}[{status}] {body}"
    return Message("tool", text, tool_call_id=result.content["tool_call_id"], is_error=True,
                   parts=parts, status=status)


def _render_round(round_events: Sequence[Event], results: dict[str, Event],
                  edits: dict[str, dict[str, Any]]) -> list[Message]:
    """One model response: one assistant message, then its answers in call order."""
    texts = [e.content.get("text") or "" for e in round_events if e.type == "assistant_msg"]
    calls = tuple(
        CallRef(e.content["tool_call_id"], e.content["name"], e.content.get("args") or {})
        for e in round_events
        if e.type == "tool_call" and not is_budget_call(e)  # a person's, not the model's
    )
    text = "\n".join(t for t in texts if t)
    if not calls and not _has_text(text):
        return []  # an empty or interrupted-before-a-word response says nothing
    reasoning = tuple(item for e in round_events if e.type == "assistant_msg"
                      for item in reasoning_of(e.content))
    messages = [Message("assistant", text, tool_calls=calls, reasoning=reasoning)]
    messages.extend(_result_message(results[c.id], edits.get(c.id))
                    for c in calls if c.id in results)
    return messages


def _group_rounds(events: Sequence[Event]) -> dict[tuple[int, str], list[Event]]:
    """assistant_msg and tool_call events keyed by (turn number, round id)."""
    rounds: dict[tuple[int, str], list[Event]] = {}
    turn = 0
    for event in events:
        turn += event.type == "user_msg"
        if event.type in ("assistant_msg", "tool_call"):
            rounds.setdefault((turn, event.round_id or f"seq:{event.seq}"), []).append(event)
    return rounds


def render_events(events: Sequence[Event]) -> list[Message]:
    """The messages of `events` before repair: each result found among `events` by its call's id."""
    results: dict[str, Event] = {}
    edits: dict[str, dict[str, Any]] = {}  # a person's arguments, by call (agentq.core.edits)
    for event in events:
        if event.type == "tool_result":
            results.setdefault(event.content["tool_call_id"], event)
        elif event.type == "resolution" and isinstance(event.content.get("args"), dict):
            edits.setdefault(event.content["tool_call_id"], event.content["args"])
    rounds = _group_rounds(events)
    messages: list[Message] = []
    turn = 0
    for event in events:
        turn += event.type == "user_msg"
        if event.type == "user_msg":
            parts = tuple(p for p in event.content.get("parts") or () if isinstance(p, dict))
            messages.append(Message("user", event.content.get("text") or "", parts=parts))
            continue
        group = rounds.get((turn, event.round_id or f"seq:{event.seq}"))
        if group is not None and group[0] is event:
            messages.extend(_render_round(group, results, edits))
    return messages


def summary_messages(view: View) -> list[Message]:
    """The view's summary as the leading message, or nothing."""
    if view.summary is None:
        return []
    return [Message("user", SUMMARY_PREFIX + view.summary.content["text"])]


def render(view: View, tools: Sequence[ToolSpec] = ()) -> Request:
    """The neutral request for the next model call on this view, already repaired."""
    messages = summary_messages(view) + render_events(view.events)
    repaired, fixes = repair_passes(messages)
    return request_for(view, tools, repaired, [fix for done in fixes for fix in done])


def request_for(view: View, tools: Sequence[ToolSpec], messages: Sequence[Message],
                fixes: Sequence[str]) -> Request:
    """The request of `view` with its repaired `messages`, led by a user message."""
    messages, fixes = _led_by_user(messages, fixes)
    return Request(system=view.settings.system, messages=messages, tools=tuple(tools),
                   model=view.settings.model or "", repairs=fixes)


def _has_text(text: str) -> bool:
    return bool(text.strip())


def _unanswered(index: int, calls: Sequence[str], answered: set[str | None]) -> list[str]:
    return [
        f"message {index}: tool call {call_id} has no answer before the next message"
        for call_id in calls
        if call_id not in answered
    ]


def _check_message(index: int, message: Message, seen: set[str]) -> list[str]:
    problems = []
    if message.role == "user" and not _has_text(message.text) and not message.parts:
        problems.append(f"message {index}: user message has no text")
    if message.role == "assistant" and not message.tool_calls and not _has_text(message.text):
        problems.append(f"message {index}: assistant message has neither text nor tool calls")
    if message.role != "assistant" and message.tool_calls:
        problems.append(f"message {index}: only assistant messages make tool calls")
    for call in message.tool_calls:
        if call.id in seen:
            problems.append(f"message {index}: duplicate tool_call_id {call.id}")
        seen.add(call.id)
    return problems


def validate(request: Request) -> list[str]:
    """Every way the request breaks the pairing contract; empty means valid."""
    if not request.messages:
        return ["the request has no messages"]
    problems = []
    if request.messages[0].role != "user":
        problems.append(f"message 0: the first message is {request.messages[0].role}, not user")
    seen: set[str] = set()
    calls: list[str] = []
    block_start, answered = 0, set[str | None]()
    for index, message in enumerate(request.messages):
        if message.role == "tool":
            if message.tool_call_id not in calls:
                problems.append(f"message {index}: tool message answers no call just before it")
            elif message.tool_call_id in answered:
                problems.append(f"message {index}: second answer to {message.tool_call_id}")
            answered.add(message.tool_call_id)
            problems += _check_message(index, message, seen)
            continue
        problems += _unanswered(block_start, calls, answered)
        problems += _check_message(index, message, seen)
        block_start, calls, answered = index, [c.id for c in message.tool_calls], set()
    return problems + _unanswered(block_start, calls, answered)


def _drop_stray_calls(messages: Sequence[Message], fixes: list[str], seen: set[str],
                      earlier: AbstractSet[str]) -> list[Message]:
    """Keep each call id once, and only on assistant messages; `earlier` messages made
    calls, and `seen` gathers the calls these make."""
    kept = []
    for message in messages:
        calls = []
        for call in message.tool_calls:
            if message.role != "assistant" or call.id in seen or call.id in earlier:
                fixes.append(f"dropped a duplicate or misplaced tool call {call.id}")
                continue
            seen.add(call.id)
            calls.append(call)
        changed = len(calls) != len(message.tool_calls)
        kept.append(replace(message, tool_calls=tuple(calls)) if changed else message)
    return kept


def _drop_empty_assistants(messages: Sequence[Message], fixes: list[str]) -> list[Message]:
    kept = []
    for message in messages:
        if message.role == "assistant" and not message.tool_calls and not _has_text(message.text):
            fixes.append("dropped an assistant message with no text and no calls")
            continue
        kept.append(message)
    return kept


def _answer_block(head: Message, answers: Sequence[Message], fixes: list[str]) -> list[Message]:
    """`head` followed by exactly one answer per call of it, in call order."""
    by_id: dict[str, Message] = {}
    for answer in answers:
        if answer.tool_call_id not in {c.id for c in head.tool_calls}:
            fixes.append(f"dropped an orphan tool message for {answer.tool_call_id}")
        elif answer.tool_call_id in by_id:
            fixes.append(f"dropped a second answer to tool call {answer.tool_call_id}")
        else:
            by_id[answer.tool_call_id] = answer
    block = [head]
    for call in head.tool_calls:
        if call.id not in by_id:
            fixes.append(f"added a cancelled result for unanswered tool call {call.id}")
        missing = Message("tool", MISSING_RESULT_TEXT, tool_call_id=call.id, is_error=True,
                          status="cancelled")
        block.append(by_id.get(call.id) or missing)
    return block


def _pair_answers(messages: Sequence[Message], fixes: list[str]) -> list[Message]:
    """Each non-tool message followed by exactly the answers its calls need."""
    paired: list[Message] = []
    index = 0
    while index < len(messages):
        head = messages[index]
        end = index + 1
        while end < len(messages) and messages[end].role == "tool":
            end += 1
        if head.role == "tool":
            orphans = messages[index:end]
            fixes.extend(f"dropped an orphan tool message for {m.tool_call_id}" for m in orphans)
        else:
            paired.extend(_answer_block(head, messages[index + 1:end], fixes))
        index = end
    return paired


def _fill_user_texts(messages: Sequence[Message], fixes: list[str]) -> list[Message]:
    filled = []
    for message in messages:
        if message.role == "user" and not _has_text(message.text) and not message.parts:
            fixes.append("filled a user message that had no text")
            message = replace(message, text=EMPTY_USER_TEXT)
        filled.append(message)
    return filled


REPAIR_PASSES = 4  # stray calls, empty answers, pairs, empty user texts


def repair_passes(
    messages: Sequence[Message], *, earlier: AbstractSet[str] = frozenset(),
    seen: set[str] | None = None,
) -> tuple[list[Message], tuple[list[str], ...]]:
    """`messages` with every pairing gap closed, and each pass's fixes, in pass order.

    `earlier`: the call ids of messages before these, already repaired (a second call with
    one of those ids is dropped); `seen` gathers the call ids these messages keep.
    Careful: `messages` must start a block (a message that is not a tool message, or the
    first message of the request), since a tool message answers the message before it.
    """
    fixes: tuple[list[str], ...] = tuple([] for _ in range(REPAIR_PASSES))
    repaired = _drop_stray_calls(messages, fixes[0], set() if seen is None else seen, earlier)
    repaired = _drop_empty_assistants(repaired, fixes[1])
    repaired = _pair_answers(repaired, fixes[2])
    return _fill_user_texts(repaired, fixes[3]), fixes


def _led_by_user(messages: Sequence[Message],
                 fixes: Sequence[str]) -> tuple[tuple[Message, ...], tuple[str, ...]]:
    if not messages or messages[0].role != "user":
        lead = Message("user", LEADING_USER_TEXT)
        return (lead, *messages), (*fixes, "inserted a leading user message")
    return tuple(messages), tuple(fixes)


def repair(request: Request) -> Request:
    """The request with every pairing gap closed; each fix is recorded in `repairs`."""
    repaired, fixes = repair_passes(request.messages)
    messages, done = _led_by_user(repaired, [fix for pass_fixes in fixes for fix in pass_fixes])
    return replace(request, messages=messages, repairs=request.repairs + done)
