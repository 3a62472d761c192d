"""The Celery queues agentq's tasks go to, one per kind of work, so slow work of one kind
cannot hold up another: a slow tool never delays a model call or a deadline.

| queue | tasks |
| --- | --- |
| `agentq.model` | `agentq.advance` (model calls, turns), `agentq.compact` (summaries), `agentq.ping` |
| `agentq.tools` | `agentq.run_tool`, unless the tool names a queue: `@agentq.tool(queue="…")` |
| `agentq.timers` | `agentq.expire` (deadlines), beat's `agentq.sweep`, `agentq.gc`, `agentq.schedules.tick` |
| `agentq.webhooks` | `agentq.webhooks.relay` (beat: what is due) and `agentq.webhooks.deliver` (one POST) |

A worker started with `-Q` takes only the queues it names; one started without takes every
queue of its deployment, tools' own queues included (`agentq dev`, `agentq demo`, a small
deployment).
"""
from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

MODEL = "agentq.model"
TOOLS = "agentq.tools"
TIMERS = "agentq.timers"
WEBHOOKS = "agentq.webhooks"  # a slow receiver holds only webhook workers
QUEUES = (MODEL, TOOLS, TIMERS, WEBHOOKS)
NO_TOOL_QUEUES: Mapping[str, str] = MappingProxyType({})

TASK_QUEUES = {
    "agentq.advance": MODEL,
    "agentq.compact": MODEL,
    "agentq.ping": MODEL,
    "agentq.run_tool": TOOLS,
    "agentq.expire": TIMERS,
    "agentq.sweep": TIMERS,
    "agentq.gc": TIMERS,
    "agentq.webhooks.relay": WEBHOOKS,
    "agentq.webhooks.deliver": WEBHOOKS,
    "agentq.schedules.tick": TIMERS,
}


def all_queues(tool_queues: Mapping[str, str]) -> tuple[str, ...]:
    """agentq's queues, then the tools' own (`tool_queues`: tool name -> queue), once each."""
    return tuple(dict.fromkeys((*QUEUES, *sorted(tool_queues.values()))))


def queue_of(kind: str, tool: str | None, tool_queues: Mapping[str, str] = NO_TOOL_QUEUES) -> str:
    """The queue a step's task goes to: a tool call to its tool's own queue, if it names one
    (`tool_queues`: tool name -> queue), else to its kind's."""
    if kind in ("tool", "child"):  # a sub-agent's call and its handover are tool tasks
        return tool_queues.get(tool or "", TOOLS)
    return TIMERS if kind == "expire" else MODEL
