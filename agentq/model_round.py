"""One model round: the context, compaction first if due, the model call, and its commit.

The commit appends the assistant_msg with its tool calls (and an error result for any
call the model invented or got wrong), schedules the tool steps in the same
transaction, and returns them as follow-ups, so no crash between the model's answer
and the tools can lose a call (inv. 3, 4).
"""
from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Sequence

from agentq import breakers
from agentq.core import drafts
from agentq.core.breaker import Wait
from agentq.core.budget import Context, fit
from agentq.core.compaction import compaction_cut, request_tokens
from agentq.core.decide import Step
from agentq.core.events import EventDraft, ToolCallRecord, View
from agentq.core.fsm import fold
from agentq.core.keys import task_id
from agentq.errors import Stale
from agentq.followups import Advance, Compact, Expire, FollowUp, RunTool
from agentq.lease import Heartbeat, renewal
from agentq.model_step import Cancelled, ModelCall, RoundInfo, StepTimedOut
from agentq.providers.base import CallContext, ModelResponse, endpoint_for
from agentq.providers.errors import CircuitOpen, ContextTooLong, ProviderError

if TYPE_CHECKING:
    from agentq.runtime import Runtime

log = logging.getLogger(__name__)

# How often a streaming model step checks that it was not interrupted (its lease renewal).
INTERRUPT_CHECK_S = 0.5
# A request refused as too long, with nothing left to compact, is sent this much shorter,
# at most this many times.
SHORTER_BY = 0.75
SHORTER_TRIES = 4


def call_model(rt: Runtime, view: View, step: Step, *, task_id: str | None = None) -> list[FollowUp]:
    """Run the llm step (or the compaction it needs first), once; `view` is the whole context."""
    cid = view.conversation_id
    context = rt.context(view)
    if context.cut is not None:  # summarize first; the model call comes on the next advance
        return [compaction(cid, context.cut - 1)]
    endpoint = endpoint_for(view.settings)
    if (wait := rt.breakers.admit(endpoint)) is not None:  # the endpoint keeps failing
        return breakers.hold(rt, view, step, wait)
    worker, record = rt.claim(cid, step, task_id)
    if record is None:
        return rt.not_claimed(cid, step)
    settings = view.settings
    ctx = CallContext(
        conversation_id=cid, step_key=step.key, round_id=step.round_id,
        attempt=record.retries + 1, rounds_committed=view.fsm.rounds, settings=settings,
    )
    call = ModelCall(
        rt.breakers.guard(rt.providers(settings), endpoint),
        lambda kind, data: rt.pubsub.publish(cid, kind, data),
        lambda: rt.store.add_step_retry(step.key),
        timers=rt.timers,
        max_attempts=rt.config.max_attempts,
        **rt.sleep_option(),
    )
    info = RoundInfo(cid, view.fsm.turn_id, step.round_id, step.key)
    renew = renewal(rt.store, step.key, worker, rt.config.lease_s, rt.clock)
    with Heartbeat(renew, timers=rt.timers, lease_s=rt.config.lease_s,
                   period_s=INTERRUPT_CHECK_S) as beat:
        try:
            response, context = _answer(call, context, view, ctx, info, beat.lost)
        except StepTimedOut as exc:
            return rt.fail_step(cid, step, worker, "timeout", "step_timeout", str(exc))
        except ContextTooLong as exc:
            return _too_long(rt, view, step, worker, exc)
        except CircuitOpen as exc:  # it opened during our retries
            return breakers.hold(rt, view, step, Wait(exc.until, exc.message), worker=worker)
        except ProviderError as exc:
            if exc.transient:  # retries exhausted: the sweeper tries again, attempts bound it
                rt.release(step, worker, "failed_recoverable", str(exc))
                return []
            return rt.fail_step(cid, step, worker, "failed_permanent", exc.code, str(exc))
        except Cancelled:
            rt.release(step, worker, "cancelled", None)
            return []
    _audit(rt, view, step, response, context.evictions)
    return _commit_response(rt, view, step, worker, response)


def _answer(call: ModelCall, context: Context, view: View, ctx: CallContext, info: RoundInfo,
            cancel) -> tuple[ModelResponse, Context]:
    """The model's answer, and the context it was given.

    The provider counts tokens its own way: a request it refuses as too long is sent
    shorter when no compaction can help (only the current turn is left), and when one
    can, the refusal goes to `_too_long`.
    """
    tries = 0
    while True:
        try:
            response = call.run(context.request, ctx, info, cancel,
                                timeout_s=view.settings.limits.llm_timeout_s)
            return response, context
        except ContextTooLong:
            shorter = _shorter(context, view) if tries < SHORTER_TRIES else None
            if shorter is None:
                raise
            context, tries = shorter, tries + 1


def _shorter(context: Context, view: View) -> Context | None:
    """The context shortened below what was refused, if no compaction can help and
    something is left to shorten."""
    if compaction_cut(view, context_tokens=0, force=True) is not None:
        return None
    sent = request_tokens(context.request)
    request, evictions = fit(context.rendered, view, budget=int(sent * SHORTER_BY))
    if request_tokens(request) >= sent:
        return None
    return replace(context, request=request, evictions=evictions)


def _too_long(rt: Runtime, view: View, step: Step, worker: str, exc) -> list[FollowUp]:
    """The provider refused the context: compact down to the current turn, and retry.

    With only the current turn left, the request was shortened as far as it goes (the
    system prompt, tool schemas and call arguments stay whole): the turn fails.
    """
    cut = compaction_cut(view, context_tokens=0, force=True)
    if cut is None:
        return rt.fail_step(view.conversation_id, step, worker, "failed_permanent",
                            "context_too_long", str(exc))
    rt.release(step, worker, "failed_recoverable", str(exc))
    return [compaction(view.conversation_id, cut - 1)]


def compaction(conversation_id: str, to_seq: int) -> Compact:
    """The compact step through `to_seq`, as its own task (`agentq.compact`)."""
    return Compact(conversation_id, to_seq, Step.compact(conversation_id, to_seq).key)


def _audit(rt: Runtime, view: View, step: Step, response: ModelResponse, evictions) -> None:
    """With AGENTQ_AUDIT, keep exactly what was sent, and what it cost (model_calls)."""
    if not rt.config.audit:
        return
    rt.store.record_model_call(
        conversation_id=view.conversation_id, step_key=step.key, sent=response.sent,
        model=view.settings.model, usage=response.usage, latency_ms=response.latency_ms,
        summary_version=view.summary.version if view.summary else None,
        evictions=list(evictions), now=rt.clock(),
    )


def _commit_response(
    rt: Runtime, view: View, step: Step, worker: str, response: ModelResponse
) -> list[FollowUp]:
    cid = view.conversation_id
    now = rt.clock()
    turn_id = view.fsm.turn_id or ""
    new_drafts, records = _response_drafts(rt, view, step, turn_id, response, now)
    try:
        # The append comes first and takes the lock, if the turn has not moved on while the
        # model answered (the log still ends at after_seq, so its cached state is view.fsm).
        with rt.store.appending(
            cid, new_drafts, next_seq=step.ref["after_seq"] + 1,
            state_after=lambda appended: fold(appended, view.fsm), now=now,
        ) as (tx, events):
            if not tx.finish_step(step.key, worker=worker, now=now):
                raise Stale("the step is no longer ours")
            tx.put_tool_calls(records)
            follow = _schedule_calls(rt, tx, records, now)
    except Stale:
        rt.store.release_step(step.key, worker=worker, status="cancelled", now=now)
        return []
    rt.notify(cid, events)
    log.info("step committed: %d tool call(s)", len(records), extra={"status": "succeeded"})
    return follow


def _schedule_calls(rt: Runtime, tx, records: Sequence[ToolCallRecord], now: datetime) -> list[FollowUp]:
    """Schedule the round's tool steps with its events, so no crash can lose one."""
    cid = tx.conversation.id
    follow: list[FollowUp] = []
    for record in records:
        if record.status == "scheduled":
            step = Step.tool(cid, record.id)
            tx.schedule_step(step_key=step.key, kind="tool", ref=step.ref,
                             celery_task_id=task_id(step.key), now=now)
            follow.append(RunTool(cid, record.id, step.key, tool=record.name))
        elif record.status == "pending":
            key = Step.expire(cid, record.id).key
            follow.append(Expire(cid, record.id, key, rt.eta(record.expires_at, now),
                                 tool=record.name))
    if follow or records:  # every call refused: the model reads why and speaks again
        return follow or [Advance(cid)]
    # the turn is over: only a waiting message gives the conversation more to do
    return [Advance(cid)] if tx.inbox_waiting() else []


def _response_drafts(rt: Runtime, view, step, turn_id, response, now):
    """The assistant_msg, its tool calls, early error results and the suspension."""
    settings = view.settings
    common = dict(turn_id=turn_id, round_id=step.round_id, step_key=step.key, created_at=now)
    out: list[EventDraft] = [
        drafts.assistant_msg(response.text, usage=response.usage, **common)
    ]
    records: list[ToolCallRecord] = []
    results: list[EventDraft] = []
    pending: list[str] = []
    for call in response.tool_calls:
        problem = rt.registry.check(call.name, call.args, settings.tools)
        tool = rt.registry.get(call.name)
        executor = tool.executor if (tool and problem is None) else "server"
        expires_at = (
            now + timedelta(seconds=tool.expires_in) if executor != "server" else None
        )
        out.append(drafts.tool_call(
            call.id, call.name, call.args, executor=executor, expires_at=expires_at, **common
        ))
        status = "pending" if executor != "server" else "scheduled"
        result = None
        if problem is not None:  # an invented tool or bad arguments: the model reads why
            status, result = "done", {"status": "error", "output": problem.output}
            results.append(drafts.tool_result(call.id, "error", problem.output, **common))
        elif executor != "server":
            pending.append(call.id)
        records.append(ToolCallRecord(
            conversation_id=view.conversation_id, id=call.id, name=call.name,
            executor=executor, status=status, args=call.args, round_id=step.round_id,
            turn_id=turn_id, created_at=now, result=result, expires_at=expires_at,
            resolved_at=now if result is not None else None,
        ))
    out.extend(results)
    if pending:
        out.append(drafts.suspension(pending, **common))
    return out, records
