"""The rendering of a conversation's closed turns, kept so a model call renders only new events.

`render(view)` walks the whole view on every model call, so a long conversation pays for its
length at every step. Events never change (inv. 1) and seq is gap-free, so what the turns
before the current one render to stays true: a `Transcript` holds it, repaired, with what
rendering later events needs to know of it, and `render_after(transcript, view, tools)`
renders only the events after it, giving exactly the request `render(view, tools)` gives.

A transcript ends only before a user_msg: there a turn starts, and a block of the request (a
message and the tool messages that answer it), so repairing what follows needs nothing of
what came before but the call ids already made. Where a later event would change what a
transcript rendered (a result for one of its calls, or a call it already has a result for:
never in a turn-ordered log, inv. 2, 3), the view is rendered from its start instead.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from agentq.core.events import Event, Summary, View
from agentq.core.render import (
    REPAIR_PASSES,
    render,
    render_events,
    repair_passes,
    request_for,
    summary_messages,
)
from agentq.core.request import Message, Request, ToolSpec


@dataclass(frozen=True)
class Transcript:
    """The repaired messages of a view's summary and its events through `through_seq`."""

    conversation_id: str
    summary: Summary | None
    first_seq: int  # the view's first event
    through_seq: int  # the last event rendered (first_seq - 1: only the summary)
    last_event_id: str | None  # that event's id: a log that is not this one never matches
    messages: tuple[Message, ...]
    fixes: tuple[tuple[str, ...], ...]  # each repair pass's fixes, in pass order
    called: frozenset[str]  # the call ids the messages keep: a later call with one is dropped
    answered: frozenset[str]  # the calls its tool_result events answer
    unanswered: frozenset[str]  # the calls it logs that no tool_result answers in it


@dataclass(frozen=True)
class _Rendered:
    """What some events render to after a transcript."""

    messages: list[Message]
    fixes: tuple[list[str], ...]
    called: set[str]
    answered: frozenset[str]
    unanswered: frozenset[str]


def begin(view: View) -> Transcript:
    """The transcript of the view's summary alone (no events yet)."""
    first_seq = view.events[0].seq if view.events else view.last_seq + 1
    return Transcript(
        conversation_id=view.conversation_id, summary=view.summary, first_seq=first_seq,
        through_seq=first_seq - 1, last_event_id=None, messages=tuple(summary_messages(view)),
        fixes=((),) * REPAIR_PASSES, called=frozenset(), answered=frozenset(),
        unanswered=frozenset(),
    )


def _rendered_after(transcript: Transcript, events: Sequence[Event]) -> _Rendered | None:
    """What `events` render to after `transcript`; None if they change what it rendered."""
    answered = frozenset(e.content["tool_call_id"] for e in events if e.type == "tool_result")
    calls = frozenset(e.content["tool_call_id"] for e in events if e.type == "tool_call")
    if answered & transcript.unanswered or calls & transcript.answered:
        return None  # a result across the cut: render() pairs it, so the cut must go
    called: set[str] = set()
    messages, fixes = repair_passes(render_events(events), earlier=transcript.called, seen=called)
    return _Rendered(messages, fixes, called, answered, calls - answered)


def extend(transcript: Transcript, events: Sequence[Event]) -> Transcript | None:
    """`transcript` through the last of `events`, which follow it and start a turn (or are
    none); None if they change what it rendered."""
    if not events:
        return transcript
    done = _rendered_after(transcript, events)
    if done is None:
        return None
    return replace(
        transcript,
        through_seq=events[-1].seq,
        last_event_id=events[-1].id,
        messages=transcript.messages + tuple(done.messages),
        fixes=tuple((*old, *new) for old, new in zip(transcript.fixes, done.fixes, strict=True)),
        called=transcript.called | done.called,
        answered=transcript.answered | done.answered,
        unanswered=transcript.unanswered | done.unanswered,
    )


def _current_turn_start(events: Sequence[Event]) -> int:
    """The index of the last user_msg (0 if none): where the events still to come may change
    what the rendering of the current turn says."""
    for index in range(len(events) - 1, 0, -1):
        if events[index].type == "user_msg":
            return index
    return 0


def _still_holds(transcript: Transcript, view: View, cut: int) -> bool:
    """`transcript` renders the start of this view, up to at most `cut` events."""
    if (transcript.conversation_id != view.conversation_id or transcript.summary != view.summary
            or not view.events or transcript.first_seq != view.events[0].seq):
        return False
    last = transcript.through_seq - transcript.first_seq  # its last event's index in the view
    if last < 0:
        return last == -1
    return last < cut and view.events[last].seq == transcript.through_seq \
        and view.events[last].id == transcript.last_event_id


def closed_turns(kept: Transcript | None, view: View) -> Transcript:
    """The transcript of the view's turns before its current one, grown from `kept` where it
    still holds (only the events after it are rendered)."""
    cut = _current_turn_start(view.events)
    start = begin(view)
    if kept is not None and _still_holds(kept, view, cut):
        grown = extend(kept, view.events[kept.through_seq - kept.first_seq + 1:cut])
        if grown is not None:
            return grown
    whole = extend(start, view.events[:cut])
    assert whole is not None  # after the summary alone, nothing can change what it rendered
    return whole


def render_after(
    kept: Transcript | None, view: View, tools: Sequence[ToolSpec] = ()
) -> tuple[Request, Transcript]:
    """`render(view, tools)`, from `kept` where it still holds; and the transcript of the
    view's closed turns, to keep for the next model call."""
    closed = closed_turns(kept, view)
    tail = _rendered_after(closed, view.events[closed.through_seq - closed.first_seq + 1:])
    if tail is None:  # the current turn answers an earlier turn's call: render it all
        return render(view, tools), closed
    fixes = tuple((*old, *new) for old, new in zip(closed.fixes, tail.fixes, strict=True))
    return _request(view, tools, (*closed.messages, *tail.messages), fixes), closed


def _request(view: View, tools: Sequence[ToolSpec], messages: Sequence[Message],
             fixes: Sequence[Sequence[str]]) -> Request:
    return request_for(view, tools, messages, [fix for done in fixes for fix in done])
