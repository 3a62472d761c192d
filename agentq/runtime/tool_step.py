"""The tool step: one server tool call, run once, its result committed (inv. 3, 5).

A tool step that keeps killing its worker fails its call with an error result the model
reads, not the conversation.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime

from agentq.core import drafts
from agentq.core.decide import Step
from agentq.core.events import ToolCallRecord, View
from agentq.core.fsm import fold
from agentq.core.scope import SYSTEM_SCOPE, Scope
from agentq.core.subagents import AGENT_EXECUTOR
from agentq.errors import LogMoved, Stale
from agentq.followups import FollowUp, RunTool
from agentq.runtime.context import StepContext, after_result
from agentq.runtime.lifecycle import Claim, Lifecycle, StepWork
from agentq.store import ConversationInfo, ConversationTxn
from agentq.tools import Registry, ToolContext, ToolOutcome

log = logging.getLogger(__name__)


def dispatch_tools(view: View, steps: Sequence[Step]) -> list[FollowUp]:
    """One run_tool task per open server call; the ledger makes repeats harmless.

    Each names its tool, which routes it to the tool's queue (agentq.worker.queues).
    """
    names = {e.content["tool_call_id"]: e.content["name"]
             for e in view.events if e.type == "tool_call"}
    follow: list[FollowUp] = []
    for step in steps:
        call_id = step.ref["tool_call_id"]
        follow.append(RunTool(view.conversation_id, call_id, step.key, tool=names.get(call_id)))
    return follow


def run_tool(
    lifecycle: Lifecycle, registry: Registry, conversation_id: str, tool_call_id: str,
    *, agent_call: Callable[[ConversationInfo, ToolCallRecord], list[FollowUp]] | None = None,
) -> list[FollowUp]:
    """Run one server tool call once, if it is still scheduled, and commit its result;
    a sub-agent's call goes to `agent_call` (agentq.runtime.children)."""
    found = lifecycle.ctx.store.load_call_and_conversation(conversation_id, tool_call_id)
    if found is None:
        return []
    conversation, call = found
    if call.executor == AGENT_EXECUTOR:
        return [] if agent_call is None else agent_call(conversation, call)
    if call.status != "scheduled":
        return []
    return lifecycle.run(ToolStep(lifecycle.ctx, registry, conversation, call))


class ToolStep(StepWork[ToolOutcome]):
    """Calls the tool with the turn's scope and its time limit; commits the tool_result."""

    def __init__(
        self, ctx: StepContext, registry: Registry, conversation: ConversationInfo,
        call: ToolCallRecord,
    ) -> None:
        step = Step.tool(conversation.id, call.id)
        super().__init__(ctx, conversation.id, conversation.tenant, step)
        self.registry = registry
        self.conversation = conversation
        self.call = call
        self.tool = call.name

    def run(self, claim: Claim, lost: threading.Event) -> ToolOutcome:
        """The tool's outcome; a tool cannot be stopped, so a lost lease only fails the commit."""
        call, conversation = self.call, self.conversation
        tool = self.registry.get(call.name)
        timeout_s = (tool.timeout if tool and tool.timeout else None) or (
            conversation.settings.limits.tool_timeout_s
        )
        fsm_scope = conversation.fsm.scope
        scope = Scope.from_json(fsm_scope) if fsm_scope else SYSTEM_SCOPE
        ctx = ToolContext(call.id, conversation.id, scope)
        return self.registry.call(call.name, call.args, ctx, timeout_s=timeout_s,
                                  allowed=conversation.settings.tools,
                                  max_result_chars=self.ctx.config.tool_result_max_chars)

    def commit(self, claim: Claim, result: ToolOutcome) -> list[FollowUp]:
        """Append the tool_result where the log ended when the call was read, which takes
        the lock; if the log moved since (another call of the round came back first), under
        the lock as it is now."""
        call, conversation = self.call, self.conversation
        now = self.ctx.clock()
        draft = drafts.tool_result(
            call.id, result.status, result.output, turn_id=call.turn_id,
            round_id=call.round_id, step_key=self.step.key, created_at=now,
        )
        store = self.ctx.store
        try:
            with store.appending(
                self.conversation_id, [draft], next_seq=conversation.next_seq,
                state_after=lambda appended: fold(appended, conversation.fsm), now=now,
            ) as (tx, events):
                self._close(tx, claim, result, now)
            fsm = tx.conversation.fsm
        except LogMoved:
            with store.locked(self.conversation_id) as tx:
                self._close(tx, claim, result, now)
                events, fsm = tx.append_and_fold([draft], now=now)
        self.ctx.notify(self.conversation_id, events)
        log.info("step committed: %s returned %s", call.name, result.status,
                 extra={"status": "succeeded"})
        return after_result(self.conversation_id, fsm)

    def _close(self, tx: ConversationTxn, claim: Claim, result: ToolOutcome, now: datetime) -> None:
        """Finish our step and close its call with the result; Stale if either moved on."""
        finished, closed = tx.finish_closing_call(
            self.step.key, worker=claim.worker, call_id=self.call.id, now=now,
            result={"status": result.status, "output": result.output},
        )
        if not finished:
            raise Stale("the step is no longer ours")
        if not closed:
            raise Stale("the call was closed meanwhile")

    def give_up(self, message: str) -> list[FollowUp]:
        """Close the call with an error result the model can read; the turn goes on."""
        now = self.ctx.clock()
        try:
            with self.ctx.store.locked(self.conversation_id) as tx:
                call = tx.load_call(self.call.id)
                if call is None or not tx.transition_call(
                    call.id, from_statuses=["scheduled"], to_status="done", now=now,
                    result={"status": "error", "output": message},
                ):
                    raise Stale("the call is no longer open")
                events, fsm = tx.append_and_fold([drafts.tool_result(
                    call.id, "error", message, turn_id=call.turn_id, round_id=call.round_id,
                    step_key=None, created_at=now,
                )], now=now)
        except Stale:
            return []
        self.ctx.notify(self.conversation_id, events)
        return after_result(self.conversation_id, fsm)
