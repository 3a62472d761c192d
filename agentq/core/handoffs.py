"""Handoffs: the model, or a person, passes the conversation to another agent, which answers
from the next round on, in this turn and the next ones, until it is handed on again.

Pure: the `handoff` event (from, to, why, by whom), the fold rule that makes its target hold
the conversation (`FsmState.agent`: which agent, the settings it runs with, what history it
sees), the view its model is shown (its input filter), and the answers a model response that
calls a transfer tool gets: the first transfer wins, and every other call of that response
is answered with an error, since it was made for the agent that is leaving.

Which agent holds a conversation is a fold of its log, cached on its row like the rest of
its state (inv. 1): nothing else records it.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final

from agentq.core.agents import AgentRef
from agentq.core.events import Event, EventDraft, FsmState, View
from agentq.core.handoff_targets import code_filter_name

HANDOFF: Final = "handoff"
BY_MODEL: Final = "model"
BY_PERSON: Final = "person"
# An input filter of the operator's code: the events before the handoff it is given, those
# the agent taking over is to see (a subset, in log order, keeping each call with its result).
CodeInputFilter = Callable[[Sequence[Event]], Sequence[Event]]
# What an earlier agent's tool calls leave in the log: the `no_tools` filter hides them.
_TOOL_EVENTS = frozenset({"tool_call", "tool_result", "suspension", "resolution"})


@dataclass(frozen=True)
class Handoff:
    """One handoff as its event records it.

    `settings` are those the target runs with, as admitted for the tenant when it was handed
    the conversation; None for the agent the conversation started with, which runs with the
    conversation's own settings (its overrides too).
    """

    source: str | None  # the agent that held it; None for raw settings
    target: str
    version: int | None
    why: str
    by: str  # BY_MODEL or BY_PERSON
    settings: dict[str, Any] | None
    input_filter: str = "all"  # InputFilter, or code:<name>
    tool_call_id: str | None = None  # the model's transfer call
    user: str | None = None  # the person who handed it, when one did

    def to_json(self) -> dict[str, Any]:
        return {"from": self.source, "to": self.target, "version": self.version,
                "why": self.why, "by": self.by, "input_filter": self.input_filter,
                "tool_call_id": self.tool_call_id, "user": self.user,
                "settings": self.settings}

    @classmethod
    def from_json(cls, content: dict[str, Any]) -> Handoff:
        return cls(source=content.get("from"), target=content["to"],
                   version=content.get("version"), why=content.get("why", ""),
                   by=content.get("by", BY_MODEL), settings=content.get("settings"),
                   input_filter=content.get("input_filter", "all"),
                   tool_call_id=content.get("tool_call_id"), user=content.get("user"))

    def draft(self, *, created_at: datetime, turn_id: str | None = None,
              round_id: str | None = None, step_key: str | None = None) -> EventDraft:
        return EventDraft(HANDOFF, self.to_json(), created_at, turn_id, round_id, step_key)


def between_turns(event: Event) -> bool:
    """Whether `event` is a person's handoff: written only between turns, after a whole one."""
    return event.type == HANDOFF and event.content.get("by") == BY_PERSON


def holder_name(fsm: FsmState, started_from: str | None) -> str | None:
    """The name of the agent that holds the conversation: the last handoff's target, else
    the agent it started from (None for raw settings)."""
    return fsm.agent["name"] if fsm.agent is not None else started_from


def holder_ref(fsm: FsmState, started_from: AgentRef | None) -> AgentRef | None:
    """The agent version that holds the conversation, whose model makes its calls: the last
    handoff's target, else the agent it started from (None for raw settings)."""
    if fsm.agent is None:
        return started_from
    return AgentRef(fsm.agent["name"], fsm.agent.get("version"))


def held_settings(fsm: FsmState) -> dict[str, Any] | None:
    """The settings of the agent a handoff gave the conversation to; None: its own."""
    return None if fsm.agent is None else fsm.agent.get("settings")


def handed_off(state: FsmState, event: Event) -> FsmState:
    """The fold rule of a `handoff` event: its target holds the conversation from here on.

    Mid-turn, the `turn` filter shows the target the turn from its user message; between
    turns (a person's handoff), from the next message on.
    """
    handoff = Handoff.from_json(event.content)
    mid_turn = state.state in ("running", "awaiting_input")
    history_seq = 0
    if handoff.input_filter == "turn":
        history_seq = state.turn_seq if mid_turn else event.seq
    agent = {"name": handoff.target, "version": handoff.version, "settings": handoff.settings,
             "input_filter": handoff.input_filter, "history_seq": history_seq,
             "handoff_seq": event.seq}
    return replace(state, agent=agent)


def _none(name: str) -> CodeInputFilter | None:
    return None


def seen_by_holder(view: View, code_filters: Callable[[str], CodeInputFilter | None] = _none
                   ) -> View:
    """The view the holder's model is rendered from: its input filter applied to the
    history before its handoff. Only for rendering: decisions read the whole view.

    `code_filters` finds the operator's functions by name; one a handoff names that this
    process lacks is a ValueError (its module is not loaded here)."""
    agent = view.fsm.agent
    if agent is None or agent.get("input_filter", "all") == "all":
        return view
    name = agent["input_filter"]
    first, cut = int(agent.get("history_seq", 0)), int(agent.get("handoff_seq", 0))
    function = code_filter_name(name)
    if function is not None:
        return _filtered_by_code(view, cut, function, code_filters)
    no_tools = name == "no_tools"
    events = tuple(e for e in view.events if e.seq >= first
                   and not (no_tools and e.seq < cut and e.type in _TOOL_EVENTS))
    summary = view.summary
    if summary is not None and (first > summary.from_seq or no_tools):
        summary = None  # it tells of what the holder is not to see
    return replace(view, events=events, summary=summary)


def _filtered_by_code(view: View, cut: int, name: str,
                      code_filters: Callable[[str], CodeInputFilter | None]) -> View:
    """The events before the handoff as the operator's function keeps them, then the rest."""
    function = code_filters(name)
    if function is None:
        raise ValueError(f"the handoff's input filter {name!r} is a function no module of "
                         "this process defines")
    before = tuple(e for e in view.events if e.seq < cut)
    kept = tuple(function(before))
    return replace(view, events=kept + tuple(e for e in view.events if e.seq >= cut))


def transfer_output(target: str) -> dict[str, Any]:
    """What the model's chosen transfer call returns."""
    return {"handed_off_to": target}


def not_run(target: str) -> str:
    """Why another call of a response that handed the conversation over was not run."""
    return f"not run: this response handed the conversation to {target!r}"


def second_transfer(target: str) -> str:
    """Why a response's second transfer call was not taken."""
    return f"only one handoff per response is taken: the conversation went to {target!r}"
