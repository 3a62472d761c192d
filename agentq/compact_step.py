"""The compact step: the model calls that write the running summary of a span of the log.

The summary covers events `from_seq..to_seq`, ends just before a user_msg (the cut of
`compaction_cut`, seed 001), and doubles as the snapshot later steps load from. The log
itself is never touched (inv. 1). The step key is `{"to_seq": M}`, and `summaries` is
unique on (conversation, to_seq): a duplicate or raced compaction writes nothing. A span
too long for one request is summarized in pieces (`core.summaries`), one call each.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from agentq import breakers
from agentq.core.breaker import Wait
from agentq.core.compaction import request_tokens
from agentq.core.decide import Step
from agentq.core.events import View
from agentq.core.summaries import summary_request, transcript
from agentq.followups import Advance, FollowUp
from agentq.lease import Heartbeat, renewal
from agentq.model_step import Cancelled, ModelCall, RoundInfo, StepTimedOut
from agentq.providers.base import CallContext, endpoint_for
from agentq.providers.errors import CircuitOpen, ContextTooLong, ProviderError

if TYPE_CHECKING:
    from agentq.runtime import Runtime

log = logging.getLogger(__name__)

# A piece refused as too long is cut this much shorter, at most this many times.
SHORTER_BY = 0.75
SHORTER_TRIES = 4


def run_compaction(
    runtime: Runtime, view: View, to_seq: int, *, task_id: str | None = None
) -> list[FollowUp]:
    """Summarize the view's events up to `to_seq`, then ask for the next step again."""
    cid = view.conversation_id
    step = Step.compact(cid, to_seq)
    endpoint = endpoint_for(view.settings)
    if (wait := runtime.breakers.admit(endpoint)) is not None:  # the endpoint keeps failing
        return breakers.hold(runtime, view, step, wait)
    worker, record = runtime.claim(cid, step, task_id)
    if record is None:
        return runtime.not_claimed(cid, step)
    ctx = CallContext(
        conversation_id=cid, step_key=step.key, round_id=None, attempt=record.retries + 1,
        rounds_committed=view.fsm.rounds, settings=view.settings, purpose="summary",
    )
    call = ModelCall(
        runtime.breakers.guard(runtime.providers(view.settings), endpoint),
        lambda kind, data: kind == "retry" and runtime.pubsub.publish(cid, kind, data),
        lambda: runtime.store.add_step_retry(step.key),
        timers=runtime.timers,
        max_attempts=runtime.config.max_attempts,
        **runtime.sleep_option(),
    )
    info = RoundInfo(cid, view.fsm.turn_id, None, step.key)
    renew = renewal(runtime.store, step.key, worker, runtime.config.lease_s, runtime.clock)
    with Heartbeat(renew, timers=runtime.timers, lease_s=runtime.config.lease_s) as beat:
        try:
            text, usage = _summarize(call, view, to_seq, ctx, info, beat.lost)
        except StepTimedOut as exc:
            return runtime.fail_step(cid, step, worker, "timeout", "step_timeout", str(exc))
        except CircuitOpen as exc:  # it opened during our retries
            return breakers.hold(runtime, view, step, Wait(exc.until, exc.message), worker=worker)
        except ProviderError as exc:
            if exc.transient:
                runtime.release(step, worker, "failed_recoverable", str(exc))
                return []
            return runtime.fail_step(cid, step, worker, "failed_permanent", exc.code, str(exc))
        except Cancelled:
            runtime.release(step, worker, "cancelled", None)
            return []
    previous = view.summary
    now = runtime.clock()
    with runtime.store.locked(cid) as tx:
        if tx.finish_step(step.key, worker=worker, now=now):
            tx.save_summary(
                from_seq=previous.to_seq + 1 if previous else 1,
                to_seq=to_seq,
                content={"text": text, "usage": usage},
                version=previous.version + 1 if previous else 1,
                now=now,
            )
            log.info("step committed: summary through seq %d", to_seq,
                     extra={"status": "succeeded"})
    return [Advance(cid)]


def _summarize(call: ModelCall, view: View, to_seq: int, ctx: CallContext, info: RoundInfo,
               cancel) -> tuple[str, dict]:
    """The summary through `to_seq`, written piece by piece onto the previous one, and the
    usage of all its calls."""
    text = transcript(view, to_seq)
    summary = view.summary.content.get("text", "") if view.summary else ""
    budget = view.settings.compaction.max_context_tokens
    usage: dict = {}
    start, tries = 0, 0
    while True:
        request, end = summary_request(view, summary, text, start, budget=budget)
        try:
            response = call.run(request, ctx, info, cancel,
                                timeout_s=view.settings.limits.llm_timeout_s)
        except ContextTooLong:  # the provider counts otherwise: smaller pieces
            if tries == SHORTER_TRIES:
                raise
            budget, tries = int(request_tokens(request) * SHORTER_BY), tries + 1
            continue
        summary, start = response.text, end
        usage = _added(usage, response.usage)
        if start >= len(text):
            return summary, usage


def _added(total: dict, usage: dict) -> dict:
    """Token counts of several calls, summed."""
    out = dict(total)
    for name, value in usage.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = out.get(name, 0) + value
    return out
