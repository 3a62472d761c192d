"""Guardrails and instructions as the log records them: verdicts, their step keys, what a trip writes.

A guardrail is an operator's check of a turn's text: an input guardrail reads the user's
message before (or, `parallel`, while) the turn's first model call runs; an output
guardrail reads the final answer before the turn ends. Each run has a step key derived
from the conversation, the phase, the guardrail's name and where the log ended when the
model step read it, so a step run again after a kill names the same run, and the one
commit that wins records its verdict once: a `guardrail` event, followed, if it tripped,
by the `error` that fails the turn (`guardrail_tripped`, naming the guardrail and its
verdict). Pure: the worker runs the functions (agentq.runtime.guardrail_step).

Instructions that are code (`system=` a function) are recorded beside the answer they
produced: their digest on every model answer, their text when it changed within the turn.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from agentq.core import drafts, keys
from agentq.core.events import Event, EventDraft, EventType
from agentq.core.settings import GuardrailRef

__all__ = ["GuardrailRef", "Verdict", "guardrail_key", "verdict_drafts"]

# input/output: the turn's message and final answer (a trip fails the turn); tool_input/
# tool_output: a server tool call's arguments and result (a trip refuses the call, and the
# model reads why: the turn goes on)
Phase = Literal["input", "output", "tool_input", "tool_output"]
TURN_PHASES = ("input", "output")
# The step kind of a guardrail's run, hashed into its key.
GUARDRAIL_STEP: keys.StepKind = "guardrail"
# The error code of a turn a guardrail stopped (webhooks: turn.failed with it).
GUARDRAIL_TRIPPED = "guardrail_tripped"
# The event type of a verdict.
GUARDRAIL_EVENT: EventType = "guardrail"
# The most of a verdict's `info` kept in the log, as JSON text: a verdict is no payload.
MAX_INFO_CHARS = 4000


@dataclass(frozen=True)
class Verdict:
    """What one run of a guardrail said: whether it tripped, and what it found."""

    name: str
    phase: Phase
    tripped: bool
    info: Any = None


def guardrail_key(conversation_id: str, phase: Phase, name: str, after_seq: int) -> str:
    """The step key of a guardrail's run in the model step that read the log to `after_seq`."""
    return keys.step_key(conversation_id, GUARDRAIL_STEP,
                         {"phase": phase, "name": name, "after_seq": after_seq})


def tool_guardrail_key(conversation_id: str, phase: Phase, name: str, tool_call_id: str) -> str:
    """The step key of a guardrail's run on a tool call's arguments or result."""
    return keys.step_key(conversation_id, GUARDRAIL_STEP,
                         {"phase": phase, "name": name, "tool_call_id": tool_call_id})


def refusal(verdict: Verdict) -> str:
    """What the model reads of a tool call a guardrail refused."""
    what = "arguments" if verdict.phase == "tool_input" else "result"
    info = "" if verdict.info is None else f": {keys.canonical_json(verdict.info)}"
    return f"the guardrail {verdict.name!r} refused this call's {what}{info}"


def first_round(turn: Sequence[Event]) -> bool:
    """The turn has no model answer yet: its input guardrails are due."""
    return bool(turn) and not any(e.type == "assistant_msg" for e in turn)


def input_text(turn: Sequence[Event]) -> str:
    """The user's message a turn's input guardrails read."""
    return str(turn[0].content.get("text") or "") if turn else ""


def verdict_drafts(verdict: Verdict, *, step_key: str, turn_id: str | None,
                   created_at: datetime, call: dict[str, Any] | None = None) -> list[EventDraft]:
    """The verdict's event and, if it tripped on the turn's message or answer, the error that
    fails the turn with it; `call`: what a guardrail agent's model call spent (its agent,
    usage and cost), shown in the event."""
    content = {"name": verdict.name, "phase": verdict.phase, "tripped": verdict.tripped,
               "info": verdict.info, **(call or {})}
    out = [EventDraft(GUARDRAIL_EVENT, content, created_at, turn_id, None, step_key)]
    if verdict.tripped and verdict.phase in TURN_PHASES:
        out.append(drafts.error(
            GUARDRAIL_TRIPPED, f"the {verdict.phase} guardrail {verdict.name!r} tripped",
            status="failed_permanent", step_key=step_key, turn_id=turn_id, round_id=None,
            created_at=created_at,
            details={"guardrail": verdict.name, "phase": verdict.phase, "info": verdict.info}))
    return out


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def instructions_record(turn: Sequence[Event], name: str, text: str) -> dict[str, Any]:
    """What an answer records of the instructions its model was given: their name and
    digest, and their text unless an earlier answer of the turn recorded the same.

    Why the text at all: an audit must show what the model was told, and a digest only
    proves it against a copy kept elsewhere; why not every round: a turn of many rounds
    would repeat a long prompt in each.
    """
    found = digest(text)
    record: dict[str, Any] = {"name": name, "digest": found}
    told = [e.content.get("instructions") for e in turn if e.type == "assistant_msg"]
    if not any(isinstance(r, dict) and r.get("digest") == found for r in told):
        record["text"] = text
    return record


def verdicts_once(events: Sequence[Event]) -> Iterator[tuple[str, str]]:
    """What `agentq check` finds wrong with a log's verdicts: a guardrail's run recorded
    twice, or a trip not followed at once by the error that fails its turn."""
    seen: set[str | None] = set()
    for index, event in enumerate(events):
        if event.type != GUARDRAIL_EVENT:
            continue
        if event.step_key in seen:
            yield "5 verdict once", f"guardrail run {event.step_key} has two verdicts"
        seen.add(event.step_key)
        following = events[index + 1] if index + 1 < len(events) else None
        if event.content.get("tripped") and event.content.get("phase") in TURN_PHASES and (
                following is None or following.type != "error"
                or following.content.get("code") != GUARDRAIL_TRIPPED):
            yield "5 verdict once", f"seq {event.seq}: a tripped guardrail did not fail its turn"
