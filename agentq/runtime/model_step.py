"""The model step: the context, compaction first if due, the model call, and its commit.

The commit appends the assistant_msg with its tool calls (and an error result for any
call the model invented or got wrong), schedules the tool steps in the same
transaction, and returns them as follow-ups, so no crash between the model's answer
and the tools can lose a call (inv. 3, 4).
"""
from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from agentq.core import drafts
from agentq.core.budget import Context, fit, plan_context
from agentq.core.compaction import compaction_cut, request_tokens
from agentq.core.decide import Step
from agentq.core.events import CallStatus, EventDraft, ToolCallRecord, View
from agentq.core.fsm import fold
from agentq.core.handoff_targets import transfer_specs
from agentq.core.handoffs import seen_by_holder
from agentq.core.keys import task_id as step_task_id
from agentq.core.render import render
from agentq.core.request import ToolSpec
from agentq.core.schedules import unattended_deadline
from agentq.core.scope import SYSTEM_SCOPE, Scope
from agentq.core.settings import Settings
from agentq.core.subagents import AGENT_EXECUTOR, child_conversation_id
from agentq.core.subagents import find as find_agent_tool
from agentq.core.usage import Tokens
from agentq.followups import Advance, FollowUp, RunTool
from agentq.providers.base import CallContext, ModelResponse
from agentq.providers.errors import BudgetAsks, CallWaits, ContextTooLong
from agentq.runtime.budget_asks import ask_about_budget
from agentq.runtime.budgets import within_budget
from agentq.runtime.compact_step import compaction
from agentq.runtime.context import StepContext, to_parent
from agentq.runtime.costs import cost_in_force, counted_call
from agentq.runtime.expire_step import expiry
from agentq.runtime.guardrail_agents import GuardrailAgents
from agentq.runtime.guardrail_step import Guard, Tripped, commit_trip
from agentq.runtime.handoffs import HandoffRound
from agentq.runtime.held import hold_for_breaker, hold_waiting_call
from agentq.runtime.instructed import instructed, told
from agentq.runtime.lifecycle import Claim, Deferred, Lifecycle, StepWork
from agentq.runtime.model_call import Cancelled, ModelCall, ModelCalls, RoundInfo
from agentq.store import ModelCallRecord, NewStep
from agentq.store.step_commit import Counted, Usage
from agentq.store.whole_commit import Finish, Scheduling, SeeingInbox
from agentq.tools import Registry

log = logging.getLogger(__name__)

# How often a streaming model step checks that it was not interrupted (its lease renewal).
INTERRUPT_CHECK_S = 0.5
# A request refused as too long, with nothing left to compact, is sent this much shorter,
# at most this many times.
SHORTER_BY = 0.75
SHORTER_TRIES = 4


def call_model(
    lifecycle: Lifecycle, calls: ModelCalls, registry: Registry, view: View, step: Step,
    *, task_id: str | None = None,
) -> list[FollowUp]:
    """Run the model step (or the compaction it needs first), once; `view` is the whole context."""
    view, instructions = instructed(registry, view)  # instructions as code: the prompt, now
    # a handoff's target sees the history its input filter leaves (agentq.core.handoffs);
    # a filtered view is rendered whole: a kept transcript is of the log as it runs
    try:
        seen = seen_by_holder(view, lifecycle.ctx.rules.input_filter)
    except ValueError as exc:  # a filter of code this process lacks: the turn cannot go on
        return lifecycle.ctx.record_error(view.conversation_id, step, "failed_permanent",
                                          "unknown_input_filter", str(exc))
    context = plan_context(seen, offered_specs(registry, view.settings),
                           lifecycle.ctx.render if seen is view else render)
    if context.cut is not None:  # summarize first; the model call comes on the next advance
        return [compaction(view.conversation_id, context.cut - 1)]
    if (wait := calls.breaker_wait(view.settings)) is not None:  # the endpoint keeps failing
        return hold_for_breaker(lifecycle.ctx, calls.announcer, view, step, wait)
    work = LlmStep(lifecycle.ctx, calls, registry, view, step, context, instructions)
    return lifecycle.run(work, task_id=task_id)


def offered_specs(registry: Registry, settings: Settings) -> list[ToolSpec]:
    """The tools the model is offered: the registry's the settings name, the agents, then
    the transfers to the agents it may hand the conversation to."""
    return (registry.specs_in_code(settings.tools) + [a.spec() for a in settings.agents or ()]
            + transfer_specs(settings.handoffs))


class LlmStep(StepWork[ModelResponse | Tripped]):
    """One model round: stream the response, then commit it with its tool calls (or, if a
    guardrail tripped, its verdicts instead: agentq.runtime.guardrail_step)."""

    heartbeat_s = INTERRUPT_CHECK_S

    def __init__(
        self, ctx: StepContext, calls: ModelCalls, registry: Registry, view: View, step: Step,
        context: Context, told: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(ctx, view.conversation_id, view.tenant, step)
        self.calls = calls
        self.registry = registry
        self.view = view
        self.context = context
        self.told = told  # what the answer records of instructions that are code
        self.guard = Guard(registry, view, step.key, step.ref["after_seq"])

    def turn(self) -> tuple[str | None, str | None]:
        return self.view.fsm.turn_id, self.view.fsm.trace

    def run(self, claim: Claim, lost: threading.Event) -> ModelResponse | Tripped:
        view, step = self.view, self.step
        settings = view.settings
        ctx = CallContext(
            conversation_id=view.conversation_id, step_key=step.key, round_id=step.round_id,
            attempt=claim.retries + 1, rounds_committed=view.fsm.rounds, settings=settings,
        )
        info = RoundInfo(view.conversation_id, view.fsm.turn_id, step.round_id, step.key)
        within_budget(self.ctx, self.view, ask=True)
        self.guard.agents = GuardrailAgents(self.ctx, self.calls, view, claim.retries + 1)
        if self.guard.before(lost):  # an input guardrail tripped: the model is not called
            return Tripped()
        call = self.calls.start(settings, info, deltas=not settings.hold_deltas)
        beside = self.guard.beside(lost)  # a trip hangs the call up
        try:
            response = self._answer(call, ctx, info, lost)
        except Cancelled:  # hung up: by a tripped guardrail beside it, or an interrupt
            if beside is not None:
                beside.join()
            if self.guard.tripped:
                log.info("model call hung up: a guardrail beside it tripped")
                return Tripped()
            raise
        except ContextTooLong as exc:  # compact down to the current turn, and retry
            cut = compaction_cut(self.view, context_tokens=0, force=True)
            if cut is None:
                raise  # shortened as far as it goes: the turn fails with it
            raise Deferred(str(exc), [compaction(self.conversation_id, cut - 1)]) from None
        if beside is not None:
            beside.join()  # the answer waits for the verdicts it runs beside
        if self.guard.tripped or self.guard.after(response, lost):
            return Tripped(response)
        return response

    def _answer(self, call: ModelCall, ctx: CallContext, info: RoundInfo,
                lost: threading.Event) -> ModelResponse:
        """The model's answer. The provider counts tokens its own way: a request it refuses
        as too long is sent shorter when no compaction can help (only the current turn is
        left); the context sent is kept for the audit."""
        tries = 0
        while True:
            try:
                return call.run(self.context.request, ctx, info, lost,
                                timeout_s=self.view.settings.limits.llm_timeout_s)
            except ContextTooLong:
                shorter = self._shorter() if tries < SHORTER_TRIES else None
                if shorter is None:
                    raise
                self.context, tries = shorter, tries + 1

    def _shorter(self) -> Context | None:
        """The context shortened below what was refused, if no compaction can help and
        something is left to shorten."""
        view, context = self.view, self.context
        if compaction_cut(view, context_tokens=0, force=True) is not None:
            return None
        sent = request_tokens(context.request)
        request, evictions = fit(context.rendered, view, budget=int(sent * SHORTER_BY))
        if request_tokens(request) >= sent:
            return None
        return replace(context, request=request, evictions=evictions)

    def hold(self, claim: Claim, opened: CallWaits) -> list[FollowUp]:
        if isinstance(opened, BudgetAsks):  # past a soft threshold: a person decides
            return ask_about_budget(self.ctx, self.view, self.step, opened, worker=claim.worker)
        return hold_waiting_call(self.ctx, self.calls.announcer, self.view, self.step, opened,
                                 worker=claim.worker)

    def commit(self, claim: Claim, result: ModelResponse | Tripped) -> list[FollowUp]:
        if isinstance(result, Tripped):
            return commit_trip(self.ctx, self.guard, result, worker=claim.worker)
        self._audit(result)
        view, step = self.view, self.step
        cid = view.conversation_id
        now = self.ctx.clock()
        turn_id = view.fsm.turn_id or ""
        tokens = Tokens.of_call(result.usage)
        cost = cost_in_force(self.ctx, view, tokens)
        new_drafts, records = self._response_drafts(turn_id, result, now, cost)
        new_drafts = self.guard.drafts(turn_id, now) + told(new_drafts, self.told)
        usage = counted_call(view, tokens, cost, now)
        finish, follow = self._finish(records, now, usage, self.guard.spent(now))
        # The append takes the lock, if the turn has not moved on while the model answered
        # (the log still ends at after_seq, so its cached state is view.fsm).
        done = self.ctx.store.writes.commit_step(
            cid, new_drafts, next_seq=step.ref["after_seq"] + 1,
            state_after=lambda appended: fold(appended, view.fsm), step_key=step.key,
            worker=claim.worker, finish=finish, now=now)
        self.waited_on = done.waited_on
        if isinstance(finish, SeeingInbox):  # the turn is over: only a waiting message goes on
            self.ctx.notices.notify_now(cid, done.events)  # streams first, then the inbox read
            follow = ([Advance(cid)] if done.message_waits() else []) + to_parent(done.conversation)
        else:
            self.ctx.notices.notify(cid, done.events)
        log.info("step committed: %d tool call(s)", len(records), extra={"status": "succeeded"})
        return follow

    def _audit(self, response: ModelResponse) -> None:
        """With AGENTQ_AUDIT, keep exactly what was sent, and what it cost (model_calls)."""
        if not self.ctx.config.audit:
            return
        view = self.view
        self.ctx.store.audit.record(ModelCallRecord(
            id=str(uuid.uuid4()), conversation_id=view.conversation_id, step_key=self.step.key,
            rendered_context=response.sent, model=view.settings.model, usage=response.usage,
            latency_ms=response.latency_ms,
            summary_version=view.summary.version if view.summary else None,
            evictions=list(self.context.evictions), created_at=self.ctx.clock(),
        ))

    def _finish(self, records: Sequence[ToolCallRecord], now: datetime, usage: Usage,
                also: tuple[Counted, ...] = ()) -> tuple[Finish, list[FollowUp]]:
        """How the commit finishes the step, with the round's calls and their tool steps so
        no crash can lose one, counting the call's `usage` (and its guardrail agents' calls,
        `also`) with it; and what it sends next."""
        cid, tenant = self.view.conversation_id, self.view.tenant
        if not records:
            return SeeingInbox(usage, also), []
        scheduled: list[NewStep] = []
        follow: list[FollowUp] = []
        for record in records:
            if record.status == "scheduled":
                step = Step.tool(cid, record.id)
                scheduled.append(NewStep.of(step, cid, step_task_id(step.key), tenant=tenant))
                follow.append(RunTool(cid, record.id, step.key, tool=record.name))
            elif record.status == "pending":
                follow.append(expiry(self.ctx, cid, record.id, record.expires_at, now,
                                     tool=record.name))
        # every call refused: the model reads why, and speaks again
        return Scheduling(records, scheduled, usage, also), follow or [Advance(cid)]

    def _response_drafts(
        self, turn_id: str, response: ModelResponse, now: datetime, cost_nanos: int | None
    ) -> tuple[list[EventDraft], list[ToolCallRecord]]:
        """The assistant_msg, its tool calls, early error results and the suspension."""
        view, step = self.view, self.step
        settings = view.settings
        common: dict[str, Any] = dict(
            turn_id=turn_id, round_id=step.round_id, step_key=step.key, created_at=now)
        out: list[EventDraft] = [
            drafts.assistant_msg(response.text, usage=response.usage, reasoning=response.reasoning,
                                 cost_nanos=cost_nanos, **common)
        ]
        records: list[ToolCallRecord] = []
        results: list[EventDraft] = []
        pending: list[str] = []
        scope = Scope.from_json(view.fsm.scope) if view.fsm.scope else SYSTEM_SCOPE
        handoff = HandoffRound.of(self.ctx, view, response.tool_calls)
        for call in response.tool_calls:
            if handoff.answers(call):  # a transfer, or any call of a response that made one
                made, answer, record = handoff.answer(
                    call, conversation_id=view.conversation_id, **common)
                out.append(made)
                results.append(answer)
                records.append(record)
                continue
            if find_agent_tool(settings.agents, call.name) is not None:
                # a sub-agent: its tool step starts the child, whose answer resolves the call
                out.append(drafts.tool_call(
                    call.id, call.name, call.args, executor=AGENT_EXECUTOR, expires_at=None,
                    child_conversation_id=child_conversation_id(view.conversation_id, call.id),
                    **common))
                records.append(ToolCallRecord(
                    conversation_id=view.conversation_id, id=call.id, name=call.name,
                    executor=AGENT_EXECUTOR, status="scheduled", args=call.args,
                    round_id=step.round_id, turn_id=turn_id, created_at=now))
                continue
            problem = self.registry.check(call.name, call.args, settings.tools)
            tool = self.registry.get(call.name)
            executor = tool.executor if (tool and problem is None) else "server"
            gated = tool is not None and problem is None and executor == "server" and (
                tool.gated(call.args, scope))
            waits = executor != "server" or gated
            expires_at = (
                now + timedelta(seconds=tool.expires_in)
                if tool is not None and tool.expires_in is not None and waits
                else None
            )
            if waits:  # a schedule's run: nobody may be there (agentq.core.schedules)
                expires_at = unattended_deadline(view.fsm.unattended, now, expires_at)
            out.append(drafts.tool_call(
                call.id, call.name, call.args, executor=executor, expires_at=expires_at,
                needs_approval=gated, **common
            ))
            status: CallStatus = "pending" if waits else "scheduled"
            result = None
            if problem is not None:  # an invented tool or bad arguments: the model reads why
                status, result = "done", {"status": "error", "output": problem.output}
                results.append(drafts.tool_result(call.id, "error", problem.output, **common))
            elif waits:
                pending.append(call.id)
            records.append(ToolCallRecord(
                conversation_id=view.conversation_id, id=call.id, name=call.name,
                executor=executor, status=status, args=call.args, round_id=step.round_id,
                turn_id=turn_id, created_at=now, result=result, expires_at=expires_at,
                resolved_at=now if result is not None else None, needs_approval=gated,
            ))
        out.extend(results)
        if handoff.handoff is not None:  # after its call's result: the holder answers next
            out.append(handoff.handoff.draft(**common))
        if pending:
            out.append(drafts.suspension(pending, **common))
        return out, records
