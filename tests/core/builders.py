"""Tiny builders for core tests: drafts for each event type, `log` to number them, `view`."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from agentq.core.events import Event, EventDraft, InboxItem, Summary, View
from agentq.core.settings import Settings
from tests.support.clock import T0

CID = "conv-1"


def _draft(type_: str, content: dict[str, Any], round: str | None = None) -> EventDraft:
    return EventDraft(type_, content, T0, round_id=round)  # type: ignore[arg-type]


def user(text: str = "hi") -> EventDraft:
    return _draft("user_msg", {"text": text})


def assistant(text: str = "", round: str = "r1", interrupted: bool = False) -> EventDraft:
    return _draft("assistant_msg", {"text": text, "interrupted": interrupted}, round)


def call(
    call_id: str,
    name: str = "get_weather",
    round: str = "r1",
    executor: str = "server",
    args: dict[str, Any] | None = None,
    expires_at: str | None = None,
) -> EventDraft:
    content = {"tool_call_id": call_id, "name": name, "args": args or {}, "executor": executor}
    if expires_at is not None:
        content["expires_at"] = expires_at
    return _draft("tool_call", content, round)


def result(call_id: str, status: str = "ok", output: Any = "done") -> EventDraft:
    return _draft("tool_result", {"tool_call_id": call_id, "status": status, "output": output})


def suspension(*call_ids: str) -> EventDraft:
    return _draft("suspension", {"pending": list(call_ids)})


def resolution(call_id: str, status: str = "resolved") -> EventDraft:
    return _draft("resolution", {"tool_call_id": call_id, "status": status, "by": "u1"})


def error(code: str = "provider_error", status: str = "failed_permanent") -> EventDraft:
    return _draft("error", {"code": code, "message": code, "step_key": "k", "status": status})


def log(*drafts: EventDraft, start_seq: int = 1, spacing_s: float = 1.0) -> tuple[Event, ...]:
    """Number drafts from `start_seq`; each user_msg opens a new turn id."""
    events = []
    turn = None
    for offset, draft in enumerate(drafts):
        seq = start_seq + offset
        if draft.type == "user_msg":
            turn = f"t{seq}"
        events.append(
            Event(
                id=f"e{seq}",
                conversation_id=CID,
                seq=seq,
                type=draft.type,
                turn_id=draft.turn_id or turn,
                round_id=draft.round_id,
                step_key=draft.step_key,
                content=draft.content,
                created_at=draft.created_at + timedelta(seconds=spacing_s * offset),
            )
        )
    return tuple(events)


def inbox_item(text: str = "next", item_id: str = "m1") -> InboxItem:
    return InboxItem(item_id, CID, {"text": text}, "enqueue", T0)


def summary(to_seq: int, text: str = "they talked") -> Summary:
    return Summary("s1", CID, 1, to_seq, {"text": text}, 1, T0)


def view(
    events: tuple[Event, ...] = (),
    *,
    summary: Summary | None = None,
    inbox: tuple[InboxItem, ...] = (),
    status: str = "active",
    **settings: Any,
) -> View:
    return View(CID, Settings(**settings), status, summary, tuple(events), inbox=inbox)


def shifted(events: tuple[Event, ...], seconds: list[float]) -> tuple[Event, ...]:
    """The same events with each created_at moved by the matching number of seconds."""
    pairs = zip(events, seconds, strict=True)
    return tuple(replace(e, created_at=e.created_at + timedelta(seconds=s)) for e, s in pairs)
