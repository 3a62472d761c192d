"""Events of the log as lines a person reads: the timeline of `agentq inspect`, the notes of `agentq chat`.

Pure: it takes the API's JSON (docs/design.md §10's shapes) and returns text, so every
layout decision is tested without a server.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from agentq.core.prices import format_money

CLIP = 80


def short(identifier: str | None, length: int = 8) -> str:
    """The first characters of an id, enough to tell rounds and turns apart on screen."""
    return "-" if not identifier else identifier[:length]


def clip(text: str, width: int = CLIP) -> str:
    """One line at most `width` characters: newlines shown as ⏎, the cut marked with …."""
    flat = text.replace("\r\n", "\n").replace("\n", "⏎")
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def compact(value: Any, width: int = CLIP) -> str:
    """A JSON value on one clipped line; a string without its quotes."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return clip(text, width)


def call_text(name: str, args: Mapping[str, Any]) -> str:
    """`name(a=1, b='x')`, as a person would write the call."""
    inner = ", ".join(f"{key}={value!r}" for key, value in args.items())
    return f"{name}({clip(inner, CLIP - len(name) - 2)})"


def reasoning_note(items: Any) -> str:
    """` · reasoning: thinking, redacted_thinking` for a round that returned reasoning items."""
    kinds = [str((entry.get("item") or {}).get("type", "?")) for entry in items or ()
             if isinstance(entry, Mapping)]
    return f" · reasoning: {', '.join(kinds)}" if kinds else ""


def clock(created_at: str) -> str:
    """`HH:MM:SS.mmm` of an RFC 3339 UTC timestamp as the API writes it."""
    _, _, time = created_at.partition("T")
    return time.rstrip("Z")[:12] or created_at


def result_status(content: Mapping[str, Any]) -> str:
    """A result's status as a person reads it: a human call answered `approved: false` was
    a rejection, not an `ok`."""
    status = str(content.get("status", "?"))
    output = content.get("output")
    if status == "ok" and isinstance(output, Mapping) and output.get("approved") is False:
        return "rejected"
    return status


def summarize(event: Mapping[str, Any], names: Mapping[str, str] | None = None) -> str:
    """What one event says, in one line; `names` maps tool_call_id to the tool's name."""
    content = event.get("content") or {}
    names = names or {}
    kind = event.get("type")
    call_id = content.get("tool_call_id", "")
    name = names.get(call_id, call_id)
    if kind == "user_msg":
        parts = content.get("parts")
        return json.dumps(clip(content.get("text") or f"[{len(parts or [])} parts]"), ensure_ascii=False)
    if kind == "assistant_msg":
        said = json.dumps(clip(content.get("text", "")), ensure_ascii=False)
        said += " (interrupted)" if content.get("interrupted") else ""
        return said + reasoning_note(content.get("reasoning"))
    if kind == "tool_call":
        executor = content.get("executor", "server")
        gate = " · needs approval" if content.get("needs_approval") else ""
        child = content.get("child_conversation_id")
        link = f" → conversation {child}" if child else ""  # a sub-agent: its own timeline
        return (f"{call_text(content.get('name', '?'), content.get('args') or {})} · "
                f"{executor}{gate} · {call_id}{link}")
    if kind == "tool_result":
        return f"{name} {result_status(content)}: {compact(content.get('output'), CLIP - len(name))}"
    if kind == "suspension":
        waiting = ", ".join(names.get(c, c) for c in content.get("pending", []))
        return f"waiting for {waiting or 'nothing'}"
    if kind == "resolution":
        reason = f": {clip(content['reason'])}" if content.get("reason") else ""
        return f"{name} {content.get('status', '?')} by {content.get('by', '?')}{reason}"
    if kind == "handoff":
        by = f" by {content.get('user') or 'a person'}" if content.get("by") == "person" else ""
        reason = f": {clip(content['why'])}" if content.get("why") else ""
        return f"handed off to {content.get('to', '?')} from {content.get('from') or '-'}{by}{reason}"
    if kind == "error":
        status = content.get("status")
        described = f"{content.get('code', '?')}: {clip(content.get('message', ''))}"
        return described + (f" [{status}]" if status else "")
    if kind == "guardrail":
        said = "tripped" if content.get("tripped") else "passed"
        info = f": {compact(content['info'], CLIP)}" if content.get("info") is not None else ""
        return (f"{content.get('phase', '?')} guardrail {content.get('name', '?')} {said}{info}"
                + _model_call(content))
    return compact(content)


def _model_call(content: Mapping[str, Any]) -> str:
    """What a guardrail agent's model call spent, as a verdict shows it ("" for a function)."""
    usage = content.get("usage")
    if not isinstance(usage, Mapping):
        return ""
    tokens = sum(int(usage.get(n) or 0) for n in ("input_tokens", "output_tokens"))
    cost = content.get("cost_nanos")
    return f" [{tokens} tokens" + ("" if cost is None else f", {format_money(cost)}") + "]"


def event_line(event: Mapping[str, Any], names: Mapping[str, str] | None = None) -> str:
    """`  seq  time  type  summary`, the columns of the timeline."""
    return (f"{event.get('seq', 0):>6}  {clock(event.get('created_at', ''))}  "
            f"{event.get('type', '?'):<13}  {summarize(event, names)}")


def timeline(
    events: Iterable[Mapping[str, Any]], *, summary: Mapping[str, Any] | None = None
) -> Iterator[str]:
    """The log grouped by turn and round, with the summary's span marked where it ends."""
    names: dict[str, str] = {}
    turns = 0
    turn_id = round_id = None
    for event in events:
        content = event.get("content") or {}
        if event.get("type") == "tool_call":
            names[content.get("tool_call_id", "")] = content.get("name", "?")
        if event.get("turn_id") and event.get("turn_id") != turn_id:
            turn_id, round_id, turns = event["turn_id"], None, turns + 1
            day = event.get("created_at", "").partition("T")[0]
            yield f"turn {turns} · {short(turn_id)} · {day}"
        if event.get("round_id") and event.get("round_id") != round_id:
            round_id = event["round_id"]
            yield f"  round {short(round_id)}"
        yield event_line(event, names)
        if summary is not None and event.get("seq") == summary.get("to_seq"):
            yield summary_line(summary)


def summary_line(summary: Mapping[str, Any]) -> str:
    version = f" v{summary['version']}" if "version" in summary else ""
    return f"  ── summary{version} stands for seqs {summary.get('from_seq')}–{summary.get('to_seq')} ──"


def header(conversation: Mapping[str, Any], summary: Mapping[str, Any] | None = None) -> list[str]:
    """Who the conversation is: id, state, provider, pending calls, inbox, the summary in use."""
    settings = conversation.get("settings") or {}
    lines = [
        f"conversation {conversation.get('id')}",
        f"  state {conversation.get('state')} · last seq {conversation.get('last_seq')} · "
        f"{settings.get('provider', '?')}/{settings.get('model', '?')} · "
        f"created {conversation.get('created_at', '?')}",
    ]
    for call in conversation.get("pending") or []:
        lines.append(f"  pending {call_text(call.get('name', '?'), call.get('args') or {})} · "
                     f"{call.get('executor')} · {call.get('tool_call_id')} · "
                     f"expires {call.get('expires_at') or 'never'}")
    if conversation.get("inbox"):
        lines.append(f"  inbox {conversation['inbox']} message(s) waiting for the turn to end")
    if summary is not None:
        text = summary.get("text")
        lines.append(summary_line(summary).strip(" ─") + (f": {clip(text)}" if text else ""))
    return lines
