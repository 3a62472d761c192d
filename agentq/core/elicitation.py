"""A server call that asked a person for input mid-call (MCP elicitation), as the log tells it.

A tool server may answer a call with a question instead of a result (MCP's
`input_required`): the call's tool step commits a `suspension` naming the call and the
question, the call waits as a pending call, and a person's answer is a `resolution` with
status `answered` and MCP's action (`accept` with content, `decline` or `cancel`), after
which the call runs again with it. Each attempt of the call is its own step, keyed by
how many answers it carries, so an answered call runs once per answer (inv. 5) and the
question before it is never asked again.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentq.core.events import Event

# A resolution with this status records a person's answer to a server's question.
ANSWERED = "answered"
# What they can answer with, as MCP's elicitation result says it.
ACTIONS: tuple[str, ...] = ("accept", "decline", "cancel")


def question(event: Event) -> dict[str, Any] | None:
    """The question a suspension event carries, if it is an elicitation's."""
    if event.type != "suspension":
        return None
    found = event.content.get("elicitation")
    return found if isinstance(found, dict) else None


def is_answer(event: Event) -> bool:
    return event.type == "resolution" and event.content.get("status") == ANSWERED


def asked(turn: Sequence[Event], call_id: str) -> int:
    """How many questions the call's server asked in the turn."""
    return sum(1 for e in turn
               if (q := question(e)) is not None and q.get("tool_call_id") == call_id)


def answered(turn: Sequence[Event], call_id: str) -> int:
    """How many of them a person answered: the attempt the call is at."""
    return sum(1 for e in turn if is_answer(e) and e.content.get("tool_call_id") == call_id)


def latest_question(turn: Sequence[Event], call_id: str) -> dict[str, Any] | None:
    """The last question asked about the call in the turn, if any."""
    found = None
    for event in turn:
        q = question(event)
        if q is not None and q.get("tool_call_id") == call_id:
            found = q
    return found
