"""The tool step: one server tool call, run once, its result committed (inv. 3, 5).

A tool step that keeps killing its worker fails its call with an error result the model
reads, not the conversation.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from datetime import timedelta

from agentq.core import drafts, once
from agentq.core.decide import Step
from agentq.core.events import ToolCallRecord, View
from agentq.core.fsm import fold
from agentq.core.schedules import unattended_deadline
from agentq.core.scope import SYSTEM_SCOPE, Scope
from agentq.core.subagents import AGENT_EXECUTOR
from agentq.errors import LogMoved, Stale
from agentq.followups import FollowUp, RunTool
from agentq.runtime.children import run_agent_call
from agentq.runtime.context import StepContext, after_result
from agentq.runtime.expire_step import expiry
from agentq.runtime.lifecycle import Claim, Lifecycle, StepWork
from agentq.runtime.once_calls import (
    CLOSED,
    OutcomeUnknown,
    StartMarks,
    commit_unknown,
    run_once,
    unknown_on_give_up,
)
from agentq.runtime.tool_guardrails import ToolGuard
from agentq.store import ConversationInfo
from agentq.store.whole_commit import ClosingCall
from agentq.telemetry import tracing
from agentq.telemetry.attributes import tool_attributes
from agentq.tools import Registry, ToolContext, ToolOutcome
from agentq.tools.remote import Asked, ServerBreakers

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
    breakers: ServerBreakers | None = None,
) -> list[FollowUp]:
    """Run one server tool call once, if it is still scheduled, and commit its result;
    a sub-agent's call is its child's to start or collect (agentq.runtime.children)."""
    found = lifecycle.ctx.store.calls.load_with_conversation(conversation_id, tool_call_id)
    if found is None:
        return []
    conversation, call = found
    if call.executor == AGENT_EXECUTOR:
        return run_agent_call(lifecycle, conversation, call)
    if call.status != "scheduled":
        return []
    return lifecycle.run(ToolStep(lifecycle.ctx, registry, conversation, call, breakers))


class ToolStep(StepWork[ToolOutcome | OutcomeUnknown]):
    """Calls the tool with the turn's scope and its time limit; commits the tool_result."""

    def __init__(
        self, ctx: StepContext, registry: Registry, conversation: ConversationInfo,
        call: ToolCallRecord, breakers: ServerBreakers | None = None,
    ) -> None:
        step = Step.tool(conversation.id, call.id, call.answers, once.run_of(call.started))
        super().__init__(ctx, conversation.id, conversation.tenant, step)
        self.registry = registry
        self.conversation = conversation
        self.call = call
        self.tool = call.name
        self.definition = registry.get(call.name)  # None: the tool is no longer registered
        self.breakers = breakers
        fsm_scope = conversation.fsm.scope
        self.scope = Scope.from_json(fsm_scope) if fsm_scope else SYSTEM_SCOPE
        self.guard = ToolGuard(registry, conversation, call, self.scope)  # agentq.runtime.tool_guardrails

    def turn(self) -> tuple[str | None, str | None]:
        return self.call.turn_id, self.conversation.fsm.trace

    def run(self, claim: Claim, lost: threading.Event) -> ToolOutcome | OutcomeUnknown:
        """The tool's outcome; a tool cannot be stopped, so a lost lease only fails the commit."""
        call = self.call
        with tracing().tool(tool_attributes(name=call.name, call_id=call.id,
                                            conversation_id=self.conversation_id)) as span:
            outcome = self._outcome(claim)
            if outcome.status != "ok":
                span.failed("tool_error")
            return outcome

    def _outcome(self, claim: Claim) -> ToolOutcome | OutcomeUnknown:
        """A `once` tool's call runs only once its start is committed, and never again
        blindly (agentq.runtime.once_calls); any other runs as it comes."""
        refused = self.guard.before()  # before a `once` call's start is marked
        if refused is not None:
            return refused
        tool = self.definition
        if tool is None or tool.effect != "once":
            return self.guard.after(self._call())
        return run_once(StartMarks(self.ctx, self.call, claim.worker), self.registry, tool,
                        self._context(), timeout_s=self._timeout_s(),
                        body=lambda: self.guard.after(self._call()))

    def _timeout_s(self) -> float:
        tool = self.definition
        return (tool.timeout if tool and tool.timeout else None) or (
            self.conversation.settings.limits.tool_timeout_s)

    def _context(self) -> ToolContext:
        return ToolContext(self.call.id, self.conversation.id, self.scope)

    def _call(self) -> ToolOutcome:
        call, conversation = self.call, self.conversation
        timeout_s, ctx = self._timeout_s(), self._context()
        return self.registry.call(call.name, call.args, ctx, timeout_s=timeout_s,
                                  allowed=conversation.settings.tools,
                                  max_result_chars=self.ctx.config.tool_result_max_chars,
                                  elicitation=call.elicitation, breakers=self.breakers)

    def commit(self, claim: Claim, result: ToolOutcome | OutcomeUnknown) -> list[FollowUp]:
        """Append the tool_result where the log ended when the call was read, which takes
        the lock; if the log moved since (another call of the round came back first), under
        the lock as it is now."""
        if result is CLOSED:  # the call was closed, or taken, before this run started
            raise Stale("the call moved before its run started")
        if isinstance(result, OutcomeUnknown):
            tool = self.definition
            return commit_unknown(self.ctx, self.call, result, step_key=self.step.key,
                                  worker=claim.worker,
                                  description=tool.description if tool else None)
        if result.asked is not None:
            return self._ask(claim, result.asked)
        call, conversation = self.call, self.conversation
        now = self.ctx.clock()
        result_draft = drafts.tool_result(
            call.id, result.status, result.output, turn_id=call.turn_id,
            round_id=call.round_id, step_key=self.step.key, created_at=now, parts=result.parts,
        )
        written = [*self.guard.drafts(now), result_draft]  # the verdicts, then the result
        store = self.ctx.store
        closing = ClosingCall(call.id, {"status": result.status, "output": result.output})
        try:
            done = store.writes.commit_step(
                self.conversation_id, written, next_seq=conversation.next_seq,
                state_after=lambda appended: fold(appended, conversation.fsm),
                step_key=self.step.key, worker=claim.worker, finish=closing, now=now)
            events, fsm = done.events, done.conversation.fsm
            self.waited_on = done.waited_on
        except LogMoved:
            with store.writes.locked(self.conversation_id) as tx:
                tx.finish(self.step.key, worker=claim.worker, finish=closing, now=now)
                events, fsm = tx.append_and_fold(written, now=now)
        self.ctx.notices.notify(self.conversation_id, events)
        log.info("step committed: %s returned %s", call.name, result.status,
                 extra={"status": "succeeded"})
        return after_result(self.conversation_id, fsm)

    def _ask(self, claim: Claim, asked: Asked) -> list[FollowUp]:
        """The server asked a person something: the step ends and the call waits for their
        answer as a pending call, with an expiry like any (agentq.core.elicitation): in a
        schedule's run nobody attends, the sooner of it and the run's rule."""
        call = self.call
        now = self.ctx.clock()
        expires_at = unattended_deadline(self.conversation.fsm.unattended, now,
                                         now + timedelta(seconds=asked.expires_in_s))
        assert expires_at is not None  # the question's own deadline is always there
        before = call.elicitation or {}
        record = {"asked": int(before.get("asked", 0)) + 1, "answered": call.answers,
                  "question": asked.question, "resume": asked.resume}
        draft = drafts.question(call, asked.question, expires_at=expires_at,
                                step_key=self.step.key, created_at=now)
        with self.ctx.store.writes.locked(self.conversation_id) as tx:
            if not tx.finish_step(self.step.key, worker=claim.worker, now=now):
                raise Stale("the step is no longer ours")
            if not tx.ask(call.id, elicitation=record, expires_at=expires_at):
                raise Stale("the call was closed meanwhile")
            events, _ = tx.append_and_fold([draft], now=now)
        self.ctx.notices.notify(self.conversation_id, events)
        log.info("step committed: %s asked a person", call.name, extra={"status": "succeeded"})
        return [expiry(self.ctx, self.conversation_id, call.id, expires_at, now)]

    def give_up(self, message: str) -> list[FollowUp]:
        """Close the call with an error result the model can read; the turn goes on. A
        `once` call whose run started waits for a person instead (inv. 13)."""
        tool = self.definition
        if tool is not None and tool.effect == "once":
            waits = unknown_on_give_up(self.ctx, self.call, message=message,
                                       description=tool.description)
            if waits is not None:
                return waits
        now = self.ctx.clock()
        try:
            with self.ctx.store.writes.locked(self.conversation_id) as tx:
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
        self.ctx.notices.notify(self.conversation_id, events)
        return after_result(self.conversation_id, fsm)
