"""What a delivery tells: the Standard Webhooks payload of one occurrence, from the log.

Built at send time from the immutable log, so every attempt of a delivery says the same
(the tool's description aside, which is the operator's code). `call.waiting` carries what
a person needs to decide without opening anything: the call, its deadline, the message
that started the turn, who it acts for, what the model said before it, and the turn's
earlier calls; for a `once` call whose run was found unfinished, `kind: outcome_unknown`
and when it started, on which worker and how long it ran until found.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentq.core import elicitation, once
from agentq.core.events import Event
from agentq.core.guardrails import GUARDRAIL_TRIPPED
from agentq.core.timefmt import format_ts

# What a `budget.exceeded` payload says of the budget (`Overspent.details`): whose it is
# (the tenant's, an agent's or the conversation's), its period and limit, what was spent,
# when it resets (null: never), whether the turn waits for that or failed, and whether it
# counts tokens or money ("cost": `limit` and `spent` are decimal text).
BUDGET_FIELDS = ("tenant", "scope", "period", "limit", "spent", "resets_at", "agent",
                 "conversation_id", "on_exceeded", "unit")
OUTPUT_CLIP = 2000  # characters of an earlier result a payload carries
TITLE_CLIP = 120


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def title_of(first_user_text: str | None) -> str | None:
    """A conversation's title: its first user message, on one line, clipped."""
    if not first_user_text:
        return None
    return clip(" ".join(first_user_text.split()), TITLE_CLIP)


def payload(
    event_type: str, *, conversation_id: str, seq: int, ref: dict[str, Any],
    turn: Sequence[Event], title: str | None, describe: Callable[[str], str | None],
    belongs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The payload of an occurrence; `turn` holds its turn's events through `seq`;
    `belongs` says which agent the conversation runs and, for a sub-agent's, its parent."""
    cause = next(e for e in turn if e.seq == seq)
    data: dict[str, Any] = {
        "conversation_id": conversation_id, "seq": seq, "turn_id": cause.turn_id,
        "occurred_at": format_ts(cause.created_at),
        "conversation": {"id": conversation_id, "title": title, **(belongs or {})},
    }
    handed = handoffs_of(turn, seq)
    if handed:  # whose answer this is: the turn passed the conversation on
        data["handoffs"] = handed
    call_id = ref.get("tool_call_id")
    if call_id is not None:
        data["call"] = call_info(turn, call_id, describe)
    if event_type == "call.waiting":
        data["context"] = call_context(turn, call_id)
    elif event_type in ("call.resolved", "call.expired"):
        data["resolution"] = {k: cause.content.get(k) for k in ("status", "by", "reason")
                              if cause.content.get(k) is not None}
    elif event_type == "turn.completed":
        data["answer"] = {"text": cause.content.get("text", "")}
    elif event_type == "turn.failed":
        data["error"] = {"code": cause.content.get("code"), "message": cause.content.get("message")}
        if cause.content.get("code") == GUARDRAIL_TRIPPED:  # which guardrail, and its verdict
            data["error"]["details"] = cause.content.get("details")
    elif event_type == "budget.exceeded":
        data["budget"] = {k: ref.get(k) for k in BUDGET_FIELDS}
    return {"type": event_type, "timestamp": format_ts(cause.created_at), "data": data}


def handoffs_of(turn: Sequence[Event], seq: int) -> list[dict[str, Any]]:
    """The turn's handoffs through `seq`: from, to, why, and by the model or a person."""
    return [{key: e.content.get(key) for key in ("from", "to", "why", "by")}
            for e in turn if e.type == "handoff" and e.seq <= seq]


def belongs_to(info: Any) -> dict[str, Any]:
    """The agent a conversation runs, and for a sub-agent's conversation the parent's call
    and the root it answers to: whose people a waiting call of it is for."""
    if info is None:
        return {}
    out: dict[str, Any] = {}
    if info.agent is not None:
        out["agent"] = info.agent.name
    if info.parent is not None:
        out["parent"] = info.parent.to_json()
    return out


def call_info(turn: Sequence[Event], call_id: str, describe: Callable[[str], str | None]
          ) -> dict[str, Any]:
    made = next((e for e in turn if e.type == "tool_call"
                 and e.content.get("tool_call_id") == call_id), None)
    content = made.content if made is not None else {"tool_call_id": call_id}
    name = content.get("name")
    info = {
        "tool_call_id": call_id, "name": name, "args": content.get("args"),
        "executor": content.get("executor"), "needs_approval": bool(content.get("needs_approval")),
        "expires_at": content.get("expires_at"),
        "description": describe(name) if name else None,
    }
    asked = elicitation.latest_question(turn, call_id)
    if asked is not None:  # what its tool server asks the person, and by when
        info["expires_at"] = asked.get("expires_at")
        info["elicitation"] = {k: v for k, v in asked.items()
                               if k in ("mode", "message", "requested_schema", "url")}
    found = _unknown_run(turn, call_id)
    if found is not None:  # a `once` call's run found unfinished: a person says what it did
        info["kind"] = once.OUTCOME_UNKNOWN
        info[once.OUTCOME_UNKNOWN] = {k: v for k, v in found.items()
                                      if k not in ("tool_call_id", "name", "args")}
    return info


def _unknown_run(turn: Sequence[Event], call_id: str) -> dict[str, Any] | None:
    """The last run of the call found with its outcome unknown, while nobody has answered."""
    if not once.waits_in(turn, call_id):
        return None
    found = [f for e in turn if (f := once.found_in(e)) is not None
             and f.get("tool_call_id") == call_id]
    return found[-1] if found else None


def call_context(turn: Sequence[Event], call_id: str | None) -> dict[str, Any]:
    """The message that started the turn, who it acts for, what the model said before the
    call, and the calls the turn made before it with their results."""
    asked = next((e for e in turn if e.type == "user_msg"), None)
    made = next((e for e in turn if e.type == "tool_call"
                 and e.content.get("tool_call_id") == call_id), None)
    said = [e.content.get("text") or "" for e in turn
            if e.type == "assistant_msg" and made is not None and e.round_id == made.round_id]
    results = {e.content.get("tool_call_id"): e.content for e in turn if e.type == "tool_result"}
    earlier = [
        {"tool_call_id": e.content.get("tool_call_id"), "name": e.content.get("name"),
         "args": e.content.get("args"),
         "status": results.get(e.content.get("tool_call_id"), {}).get("status"),
         "output": _output(results.get(e.content.get("tool_call_id"), {}).get("output"))}
        for e in turn
        if e.type == "tool_call" and made is not None and e.seq < made.seq
    ]
    scope = (asked.content.get("scope") or {}) if asked is not None else {}
    return {
        "user_message": asked.content.get("text") if asked is not None else None,
        "acting_user": {"tenant": scope.get("tenant"), "user": scope.get("user")},
        "assistant_text": "\n".join(t for t in said if t),
        "earlier_calls": earlier,
    }


def _output(output: Any) -> Any:
    if isinstance(output, str):
        return clip(output, OUTPUT_CLIP)
    return output
