"""The compact step: one model call that writes the running summary of a span of the log.

The summary covers events `from_seq..to_seq`, ends just before a user_msg (the cut of
`compaction_cut`, seed 001), and doubles as the snapshot later steps load from. The log
itself is never touched (inv. 1). The step key is `{"to_seq": M}`, and `summaries` is
unique on (conversation, to_seq): a duplicate or raced compaction writes nothing.
"""
from __future__ import annotations

import logging
import threading

from agentq.core.compaction import summary_request
from agentq.core.decide import Step
from agentq.core.events import View
from agentq.followups import Advance, Compact, FollowUp
from agentq.providers.base import CallContext, ModelResponse
from agentq.runtime.context import StepContext
from agentq.runtime.lifecycle import Claim, Lifecycle, StepWork
from agentq.runtime.model_call import ModelCalls, RoundInfo

log = logging.getLogger(__name__)


def compaction(conversation_id: str, to_seq: int) -> Compact:
    """The compact step through `to_seq`, as its own task (`agentq.compact`)."""
    return Compact(conversation_id, to_seq, Step.compact(conversation_id, to_seq).key)


def compact(
    lifecycle: Lifecycle, calls: ModelCalls, conversation_id: str, to_seq: int,
    *, task_id: str | None = None,
) -> list[FollowUp]:
    """Summarize the log through `to_seq` (the model call waits for it), then advance."""
    view = lifecycle.ctx.store.load_view(conversation_id)
    if view is None or to_seq > view.last_seq:
        return []
    if view.summary is not None and view.summary.to_seq >= to_seq:
        return [Advance(conversation_id)]  # done already; its advance may have been lost
    return lifecycle.run(CompactStep(lifecycle.ctx, calls, view, to_seq), task_id=task_id)


class CompactStep(StepWork[ModelResponse]):
    """Summarize the view's events up to `to_seq`, then ask for the next step again."""

    def __init__(self, ctx: StepContext, calls: ModelCalls, view: View, to_seq: int) -> None:
        super().__init__(ctx, view.conversation_id, view.tenant,
                         Step.compact(view.conversation_id, to_seq))
        self.calls = calls
        self.view = view
        self.to_seq = to_seq

    def run(self, claim: Claim, lost: threading.Event) -> ModelResponse:
        view = self.view
        request = summary_request(view, self.to_seq)
        ctx = CallContext(
            conversation_id=view.conversation_id, step_key=self.step.key, round_id=None,
            attempt=claim.retries + 1, rounds_committed=view.fsm.rounds, settings=view.settings,
            purpose="summary",
        )
        info = RoundInfo(view.conversation_id, view.fsm.turn_id, None, self.step.key)
        call = self.calls.start(view.settings, info, deltas=False)
        return call.run(request, ctx, info, lost, timeout_s=view.settings.limits.llm_timeout_s)

    def commit(self, claim: Claim, result: ModelResponse) -> list[FollowUp]:
        """Save the summary; a step no longer ours writes nothing, a later advance sorts it out."""
        previous = self.view.summary
        now = self.ctx.clock()
        with self.ctx.store.locked(self.conversation_id) as tx:
            if tx.finish_step(self.step.key, worker=claim.worker, now=now):
                tx.save_summary(
                    from_seq=previous.to_seq + 1 if previous else 1,
                    to_seq=self.to_seq,
                    content={"text": result.text, "usage": result.usage},
                    version=previous.version + 1 if previous else 1,
                    now=now,
                )
                log.info("step committed: summary through seq %d", self.to_seq,
                         extra={"status": "succeeded"})
        return [Advance(self.conversation_id)]
