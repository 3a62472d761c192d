"""Sub-agents: an agent listed as a tool of another, whose call runs as a child conversation.

Pure: what the model sees of an agent tool, the child's id (derived from the parent's
conversation and call, inv. 10, so a step run twice asks for the same child), what the
child is asked, the ceilings that refuse a child, and what the child's turn answers.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentq.core.agent_tools import (
    AGENT_EXECUTOR,
    CHILD_STEP,
    DEFAULT_INPUT_SCHEMA,
    AgentTool,
    Parent,
    child_conversation_id,
    find,
)
from agentq.core.events import Event

__all__ = ["AGENT_EXECUTOR", "CHILD_STEP", "DEFAULT_INPUT_SCHEMA", "AgentTool", "Parent",
           "answer", "child_conversation_id", "child_input", "find", "nth_agent_call", "refusal"]

def child_input(tool: AgentTool, args: dict[str, Any]) -> str | None:
    """The child's first message: the `input` of the default schema, else the arguments as
    JSON; None if the default schema's `input` is not a string."""
    if tool.input_schema is None:
        text = args.get("input")
        return text if isinstance(text, str) and set(args) == {"input"} else None
    return json.dumps(args, ensure_ascii=False, sort_keys=True)


def refusal(*, depth: int, nth_child: int, max_depth: int, max_children: int) -> str | None:
    """Why the operator's ceilings refuse the `nth_child` (1-based) of a turn of a
    conversation at `depth` (a root is 0), or None."""
    if depth + 1 > max_depth:
        return (f"cannot start a sub-agent: conversations nest at most {max_depth} deep "
                f"(max_agent_depth)")
    if nth_child > max_children:
        return (f"cannot start a sub-agent: a turn starts at most {max_children} "
                f"(max_children_per_turn)")
    return None


def nth_agent_call(turn: Sequence[Event], tool_call_id: str) -> int:
    """The position (1-based) of the call among the turn's agent calls, in log order."""
    ids = [e.content["tool_call_id"] for e in turn
           if e.type == "tool_call" and e.content.get("executor") == AGENT_EXECUTOR]
    return ids.index(tool_call_id) + 1 if tool_call_id in ids else len(ids) + 1


def answer(events: Sequence[Event], *, structured: bool) -> tuple[str, Any]:
    """("ok" | "error", output) of the child's last turn, as its parent's call returns it.

    The last model answer of the turn (parsed as JSON when the agent answers in a
    structured format), or an error naming why the turn failed or stopped.
    """
    turn_start = max((i for i, e in enumerate(events) if e.type == "user_msg"), default=0)
    turn = events[turn_start:]
    failed = next((e for e in reversed(turn) if e.type == "error"
                   and e.content.get("status") in ("failed_permanent", "timeout")), None)
    if failed is not None:
        return "error", (f"the agent failed: {failed.content.get('code')}: "
                         f"{failed.content.get('message')}")
    last = next((e for e in reversed(turn) if e.type == "assistant_msg"), None)
    if last is None or last.content.get("interrupted"):
        return "error", "the agent's turn was interrupted before it answered"
    text = last.content.get("text", "")
    if structured:
        try:
            return "ok", json.loads(text)
        except ValueError:
            return "ok", text
    return "ok", text
