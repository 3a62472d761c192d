"""Sub-agent calls: the tool step that starts a child conversation, and the step that hands
the child's answer back to its parent's call.

A child started in a schedule's run nobody attends inherits the run's unattended rule in its
first message, so its own waits for a person end by the rule too and it answers its parent.

A parent's agent call is a pending call (executor "agent") from the moment the model makes
it: it holds no worker while the child runs. Its tool step starts the child in the
parent's commit, under the parent's lock: the child's id is derived from the call
(`core.subagents.child_conversation_id`), and its row and first message are inserted only
if absent, so a step that runs twice never starts a second child (inv. 5, 10). When the
child's turn ends, the append that ends it schedules the parent's `child` step in its own
transaction (`store.eventlog`), so the handover survives any crash: the sweeper re-drives
a scheduled step whose task was lost. That step closes the parent's call with the child's
answer, once: the call moves from pending to done only if still pending.

A child's steps belong to the parent turn's trace (inv. 11): the start step's
`invoke_agent` span is kept as the child's first message's traceparent, so every step of
the child's turn is a span under it, and the start and handover steps join the parent's.
"""
from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentq.core import drafts, subagents
from agentq.core.agent_tools import Parent
from agentq.core.agents import AgentRef
from agentq.core.decide import Step
from agentq.core.events import Event, FsmState, ToolCallRecord
from agentq.core.settings import Settings
from agentq.errors import InvalidInput, Stale
from agentq.followups import Advance, FollowUp
from agentq.runtime.context import StepContext, after_result
from agentq.runtime.lifecycle import Claim, Lifecycle, StepWork
from agentq.runtime.seams import TenantRules
from agentq.store import ConversationInfo, ConversationTxn
from agentq.store.agents import CODE_OWNER
from agentq.telemetry import tracing
from agentq.telemetry.attributes import agent_attributes

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChildAgent:
    """The agent a child runs: its version and its settings as admitted for the tenant."""

    ref: AgentRef
    settings: Settings


def find_agent(store: Any, rules: TenantRules, tenant: str, name: str) -> ChildAgent | str:
    """The agent a child of `tenant`'s runs, or why it cannot run (a message the model reads):
    the tenant's own agent of the name, else the code's that the rules offer it, with its
    settings admitted as a new conversation's would be."""
    found = store.agents.load_version(tenant, name)
    if found is None and rules.offers_agent(name, tenant):
        found = store.agents.load_version(CODE_OWNER, name)
    if found is None:
        return f"no agent named {name!r}"
    try:
        settings = rules.settings_for(found.definition.settings, tenant,
                                      from_code=found.source == "code")
    except InvalidInput as exc:
        return f"the agent {name!r} cannot start: {exc}"
    return ChildAgent(found.ref, settings)


@dataclass(frozen=True)
class Start:
    """Start the child with this agent and first message, in the trace of `traceparent`."""

    agent: ChildAgent
    text: str
    traceparent: str | None = None


def run_agent_call(lifecycle: Lifecycle, conversation: ConversationInfo, call: ToolCallRecord
                   ) -> list[FollowUp]:
    """The step an agent call is at: start its child (scheduled), or collect its answer
    (pending, once the child's ended turn scheduled the handover: a start task delivered
    again finds no handover yet, and does nothing)."""
    if call.status == "scheduled":
        return lifecycle.run(StartChild(lifecycle.ctx, conversation, call))
    if call.status == "pending":
        work = CollectChild(lifecycle.ctx, conversation, call)
        if lifecycle.ctx.store.steps.load(work.step.key) is not None:
            return lifecycle.run(work)
    return []


class StartChild(StepWork["Start | str"]):
    """The agent call's tool step: the child conversation, started in the parent's commit."""

    def __init__(self, ctx: StepContext, conversation: ConversationInfo, call: ToolCallRecord
                 ) -> None:
        super().__init__(ctx, conversation.id, conversation.tenant, Step.tool(conversation.id, call.id))
        self.conversation, self.call = conversation, call
        self.tool = call.name

    def turn(self) -> tuple[str | None, str | None]:
        return self.call.turn_id, self.conversation.fsm.trace

    def run(self, claim: Claim, lost: threading.Event) -> Start | str:
        """What to start, or why not (the model reads it): bad input, a ceiling, no agent."""
        conversation, call = self.conversation, self.call
        tool = subagents.find(conversation.settings.agents, call.name)
        if tool is None:
            return f"unknown agent {call.name!r}"
        text = subagents.child_input(tool, call.args)
        if text is None:
            return f"invalid arguments for {call.name!r}: give one string argument, 'input'"
        limits = self.ctx.rules.ceilings_for(conversation.tenant)
        turn = self.ctx.store.log.load_view(conversation.id, turn_only=True)
        nth = subagents.nth_agent_call(turn.events if turn else (), call.id)
        refused = subagents.refusal(depth=conversation.depth, nth_child=nth,
                                    max_depth=limits.max_agent_depth,
                                    max_children=limits.max_children_per_turn)
        if refused is not None:
            return refused
        found = find_agent(self.ctx.store, self.ctx.rules, conversation.tenant, call.name)
        if isinstance(found, str):
            return found
        child_id = subagents.child_conversation_id(conversation.id, call.id)
        tracer = tracing()
        with tracer.agent(agent_attributes(name=call.name, version=found.ref.version,
                                           conversation_id=child_id)):
            return Start(found, text, tracer.traceparent())

    def commit(self, claim: Claim, result: Start | str) -> list[FollowUp]:
        now = self.ctx.clock()
        parent, call = self.conversation, self.call
        child_id = subagents.child_conversation_id(parent.id, call.id)
        with self.ctx.store.writes.locked(parent.id) as tx:
            if not tx.finish_step(self.step.key, worker=claim.worker, now=now):
                raise Stale("the step is no longer ours")
            if isinstance(result, str):  # the model reads why no child was started
                closed = self._refuse(tx, result, now)
            else:
                closed = None
                self._start(tx, child_id, result, now)
        if closed is not None:
            self.ctx.notices.notify(self.conversation_id, closed[0])
            return after_result(self.conversation_id, closed[1])
        log.info("sub-agent %s runs as conversation %s", call.name, child_id,
                 extra={"status": "succeeded"})
        return [Advance(child_id)]

    def _start(self, tx: ConversationTxn, child_id: str, start: Start, now: datetime) -> None:
        """Mark the call as waiting on its child, and insert the child if it is not there."""
        parent, call = self.conversation, self.call
        if not tx.transition_call(call.id, from_statuses=["scheduled"], to_status="pending",
                                  now=now):
            raise Stale("the call was closed meanwhile")
        link = Parent(parent.id, call.id, parent.depth + 1, parent.root_id)
        named = uuid.UUID(child_id)
        first = drafts.user_msg(start.text, turn_id=str(uuid.uuid5(named, "turn")),
                                message_id=str(uuid.uuid5(named, "message")),
                                scope=parent.fsm.scope or {}, created_at=now,
                                traceparent=start.traceparent,
                                unattended=parent.fsm.unattended)
        tx.start_child(child_id, settings=start.agent.settings, agent=start.agent.ref,
                       parent=link, first=first, now=now)

    def _refuse(self, tx: ConversationTxn, message: str, now: datetime
                ) -> tuple[list[Event], FsmState]:
        call = self.call
        if not tx.transition_call(call.id, from_statuses=["scheduled"], to_status="done", now=now,
                                  result={"status": "error", "output": message}):
            raise Stale("the call was closed meanwhile")
        return tx.append_and_fold([drafts.tool_result(
            call.id, "error", message, turn_id=call.turn_id, round_id=call.round_id,
            step_key=self.step.key, created_at=now)], now=now)

    def give_up(self, message: str) -> list[FollowUp]:
        return close_with_error(self.ctx, self.conversation_id, self.call.id, message,
                                from_statuses=["scheduled"])


class CollectChild(StepWork["tuple[str, Any]"]):
    """Hands the child's answer to the parent's call, which waited (pending) until now."""

    def __init__(self, ctx: StepContext, conversation: ConversationInfo, call: ToolCallRecord) -> None:
        super().__init__(ctx, conversation.id, conversation.tenant,
                         Step.child(conversation.id, call.id))
        self.conversation, self.call = conversation, call
        self.tool = call.name

    def turn(self) -> tuple[str | None, str | None]:
        return self.call.turn_id, self.conversation.fsm.trace

    def run(self, claim: Claim, lost: threading.Event) -> tuple[str, Any]:
        child_id = subagents.child_conversation_id(self.conversation_id, self.call.id)
        child = self.ctx.store.log.load_view(child_id, turn_only=True)
        if child is None:
            return "error", "the agent's conversation is gone"
        structured = child.settings.response_format is not None
        return subagents.answer(child.events, structured=structured)

    def commit(self, claim: Claim, result: tuple[str, Any]) -> list[FollowUp]:
        status, output = result
        capped = self.ctx.config.tool_result_max_chars
        if isinstance(output, str) and capped is not None and len(output) > capped:
            output = output[:capped] + f"\n[result cut: {len(output):,} characters]"
        now, call = self.ctx.clock(), self.call
        with self.ctx.store.writes.locked(self.conversation_id) as tx:
            if not tx.finish_step(self.step.key, worker=claim.worker, now=now):
                raise Stale("the step is no longer ours")
            if not tx.transition_call(call.id, from_statuses=["pending"], to_status="done",
                                      now=now, result={"status": status, "output": output}):
                raise Stale("the call was closed meanwhile")
            events, fsm = tx.append_and_fold([drafts.tool_result(
                call.id, status, output, turn_id=call.turn_id, round_id=call.round_id,
                step_key=self.step.key, created_at=now)], now=now)
        self.ctx.notices.notify(self.conversation_id, events)
        log.info("sub-agent %s answered: %s", call.name, status, extra={"status": "succeeded"})
        return after_result(self.conversation_id, fsm)

    def give_up(self, message: str) -> list[FollowUp]:
        return close_with_error(self.ctx, self.conversation_id, self.call.id, message,
                                from_statuses=["pending"])


def close_with_error(ctx: StepContext, conversation_id: str, call_id: str, message: str,
                     *, from_statuses: list[str]) -> list[FollowUp]:
    """Close the call with an error result the model reads; the turn goes on."""
    now = ctx.clock()
    try:
        with ctx.store.writes.locked(conversation_id) as tx:
            call = tx.load_call(call_id)
            if call is None or not tx.transition_call(
                call_id, from_statuses=from_statuses, to_status="done", now=now,
                result={"status": "error", "output": message},
            ):
                raise Stale("the call is no longer open")
            events, fsm = tx.append_and_fold([drafts.tool_result(
                call_id, "error", message, turn_id=call.turn_id, round_id=call.round_id,
                step_key=None, created_at=now)], now=now)
    except Stale:
        return []
    ctx.notices.notify(conversation_id, events)
    return after_result(conversation_id, fsm)
