"""The compact step: one model call that writes the running summary of a span of the log.

The summary covers events `from_seq..to_seq`, ends just before a user_msg (the cut of
`compaction_cut`, seed 001), and doubles as the snapshot later steps load from. The log
itself is never touched (inv. 1). The step key is `{"to_seq": M}`, and `summaries` is
unique on (conversation, to_seq): a duplicate or raced compaction writes nothing.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from agentq.core.compaction import summary_request
from agentq.core.decide import Step
from agentq.core.events import View
from agentq.followups import Advance, FollowUp
from agentq.runtime.leases import Heartbeat, renewal
from agentq.runtime.model_call import Cancelled, ModelCall, RoundInfo, StepTimedOut
from agentq.providers.base import CallContext
from agentq.providers.errors import ProviderError

if TYPE_CHECKING:
    from agentq.runtime import Runtime

log = logging.getLogger(__name__)


def run_compaction(
    runtime: Runtime, view: View, to_seq: int, *, task_id: str | None = None
) -> list[FollowUp]:
    """Summarize the view's events up to `to_seq`, then ask for the next step again."""
    cid = view.conversation_id
    step = Step.compact(cid, to_seq)
    worker, record = runtime.claim(cid, step, task_id)
    if record is None:
        return runtime.not_claimed(cid, step)
    request = summary_request(view, to_seq)
    ctx = CallContext(
        conversation_id=cid, step_key=step.key, round_id=None, attempt=record.retries + 1,
        rounds_committed=view.fsm.rounds, settings=view.settings, purpose="summary",
    )
    call = ModelCall(
        runtime.providers(view.settings),
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
            response = call.run(request, ctx, info, beat.lost,
                                timeout_s=view.settings.limits.llm_timeout_s)
        except StepTimedOut as exc:
            return runtime.fail_step(cid, step, worker, "timeout", "step_timeout", str(exc))
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
                content={"text": response.text, "usage": response.usage},
                version=previous.version + 1 if previous else 1,
                now=now,
            )
            log.info("step committed: summary through seq %d", to_seq,
                     extra={"status": "succeeded"})
    return [Advance(cid)]
