"""`once` runs that started and died, as an attempt killed mid-call leaves the store: its
start mark committed and the tool's effect made, then nothing (in-process tests; the worker
tests kill real processes)."""
from __future__ import annotations

from datetime import timedelta

from agentq.core import once
from agentq.followups import Advance, FollowUp, RunTool
from tests.support import tools_for_tests

DEAD = "host-a:4242:1"  # the worker that died


def until_tool(runtime, follow: list[FollowUp]) -> list[RunTool]:
    """Run the follow-ups up to the tool calls, which are returned, not run."""
    pending, runs = list(follow), []
    while pending:
        item = pending.pop(0)
        if isinstance(item, RunTool):
            runs.append(item)
        elif isinstance(item, Advance):
            pending.extend(runtime.advance(item.conversation_id))
    return runs


def started_and_died(store, clock, cid: str, follow: list[FollowUp]) -> str:
    """An attempt claims the `once` call's run, commits its start mark, pays and dies; the
    call's id. The run's task is sent again by the caller (a redelivery, the sweeper)."""
    (run,) = [f for f in follow if isinstance(f, RunTool)]
    call = store.calls.load(cid, run.tool_call_id)
    with store.writes.locked(cid) as tx:
        tx.mark_started(call.id, started=once.start_mark(
            once.run_of(call.started), worker=DEAD, now=clock() - timedelta(seconds=7)))
    tools_for_tests._count(f"pay:{call.id}")
    return call.id
