"""A turn's timeline and a conversation's tree as text: `agentq inspect ID --turn T` and `--tree`.

Pure: it takes the API's JSON (agentq.api.timeline) and returns lines, each step a row with
its offset from the turn's start, its length, a bar scaled to the turn, and its attempts.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from agentq.cli.timeline import clip, short
from agentq.core.timefmt import parse_ts

WIDTH = 40  # characters of the bar column: the whole turn


def _at(text: str | None) -> datetime | None:
    return None if not text else parse_ts(text)


def _ms(start: datetime, end: datetime | None) -> str:
    return "…" if end is None else f"{(end - start).total_seconds() * 1000:.0f}ms"


class Axis:
    """The turn's span, mapped onto WIDTH characters."""

    def __init__(self, start: datetime, end: datetime) -> None:
        self.start, self.end = start, max(end, start)

    def bar(self, start: datetime, end: datetime | None, fill: str = "█") -> str:
        span = (self.end - self.start).total_seconds() or 1.0
        left = round((start - self.start).total_seconds() / span * WIDTH)
        right = round(((end or self.end) - self.start).total_seconds() / span * WIDTH)
        left = min(max(left, 0), WIDTH - 1)
        return (" " * left + fill * max(1, right - left)).ljust(WIDTH)[:WIDTH]

    def offset(self, at: datetime) -> str:
        return f"+{(at - self.start).total_seconds() * 1000:.0f}ms"


def turn_lines(drawn: Mapping[str, Any], *, now: datetime) -> Iterator[str]:
    """The turn's steps, calls and model calls, one line each, on one axis."""
    start = _at(drawn["started_at"]) or now
    axis = Axis(start, _latest(drawn) or now)
    ended = _at(drawn.get("ended_at"))
    yield (f"turn {drawn['turn_id']} · {drawn['started_at']} · "
           + ("running" if ended is None else f"took {_ms(start, ended)}"))
    for step in drawn.get("steps", []):
        yield from _step_lines(step, axis)
    for call in drawn.get("calls", []):
        yield from _call_lines(call, axis)
    for model in drawn.get("model_calls", []):
        usage = model.get("usage") or {}
        tokens = f"{usage.get('input_tokens', '?')} in / {usage.get('output_tokens', '?')} out"
        ttft = model.get("time_to_first_token_ms")
        extra = (f" · first token {ttft}ms" if ttft is not None else "") + (
            f" · cost {model['cost']}" if model.get("cost") is not None else "")
        at = _at(model["at"]) or start
        yield f"  model  {axis.offset(at):>9}  round {short(model.get('round_id'))} · {tokens}{extra}"
    for mark in drawn.get("marks", []):
        at = _at(mark["at"]) or start
        yield f"  mark   {axis.offset(at):>9}  #{mark['seq']} {mark['type']}"


def _step_lines(step: Mapping[str, Any], axis: Axis) -> Iterator[str]:
    scheduled = _at(step["scheduled_at"]) or axis.start
    finished = _at(step.get("finished_at"))
    retries = f" · {step['retries']} provider retr{'y' if step['retries'] == 1 else 'ies'}" \
        if step.get("retries") else ""
    yield (f"  step   {axis.offset(scheduled):>9}  {axis.bar(scheduled, finished)}  "
           f"{clip(step['label'], 40)} · {step['status']} · {_ms(scheduled, finished)}{retries}")
    for wait in step.get("waits", []):
        begun = _at(wait["start"]) or scheduled
        yield (f"    wait {axis.offset(begun):>9}  {axis.bar(begun, _at(wait.get('end')), '░')}  "
               f"for a {wait['kind']} · {_ms(begun, _at(wait.get('end')))}")
    for attempt in step.get("attempts", []):
        claimed = _at(attempt.get("claimed_at")) or scheduled
        error = f" · {clip(attempt['error'], 50)}" if attempt.get("error") else ""
        yield (f"    #{attempt['number']:<3} {axis.offset(claimed):>9}  "
               f"{axis.bar(claimed, _at(attempt.get('ended_at')), '▒')}  "
               f"{attempt['outcome']} on {attempt.get('worker') or '?'}{error}")


def _call_lines(call: Mapping[str, Any], axis: Axis) -> Iterator[str]:
    created = _at(call["created_at"]) or axis.start
    resolved = _at(call.get("resolved_at"))
    child = f" → conversation {call['child_conversation_id']}" if call.get("child_conversation_id") \
        else ""
    yield (f"  call   {axis.offset(created):>9}  {axis.bar(created, resolved, '─')}  "
           f"{call['name']} · {call['executor']} · {call['status']} · {_ms(created, resolved)}"
           f"{child}")
    for wait in call.get("waits", []):
        begun = _at(wait["start"]) or created
        yield (f"    wait {axis.offset(begun):>9}  {axis.bar(begun, _at(wait.get('end')), '░')}  "
               f"for a {wait['kind']} · {_ms(begun, _at(wait.get('end')))}")


def _latest(drawn: Mapping[str, Any]) -> datetime | None:
    """The last instant anything of the turn is known to have happened."""
    found = [_at(drawn.get("ended_at"))]
    for step in drawn.get("steps", []):
        found += [_at(step.get("finished_at")), _at(step.get("scheduled_at"))]
        found += [_at(a.get("claimed_at")) for a in step.get("attempts", [])]
    for call in drawn.get("calls", []):
        found += [_at(call.get("resolved_at")), _at(call.get("created_at"))]
    found += [_at(m.get("at")) for m in drawn.get("model_calls", [])]
    known = [at for at in found if at is not None]
    return max(known) if known else None


def tree_lines(tree: Mapping[str, Any]) -> Iterator[str]:
    """One line per conversation, indented by depth."""
    for node in tree.get("nodes", []):
        agent = f" · agent {node['agent']}" if node.get("agent") else ""
        cost = f" · cost {node['cost']}" if node.get("cost") is not None else ""
        yield (f"{'  ' * node['depth']}{node['id']} · {node['state']}{agent} · "
               f"{node['input_tokens']} in / {node['output_tokens']} out tokens · "
               f"{node['model_calls']} model call(s){cost}")
