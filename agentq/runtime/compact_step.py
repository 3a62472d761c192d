"""The compact step: the model calls that write the running summary of a span of the log.

The summary covers events `from_seq..to_seq`, ends just before a user_msg (the cut of
`compaction_cut`, docs/design.md §16.2), and doubles as the snapshot later steps load from. The log
itself is never touched (inv. 1). The step key is `{"to_seq": M}`, and `summaries` is
unique on (conversation, to_seq): a duplicate or raced compaction writes nothing. A span
too long for one request is summarized in pieces (`core.summaries`), one call each.
"""
from __future__ import annotations

import logging
import threading

from agentq.core.compaction import request_tokens
from agentq.core.decide import Step
from agentq.core.events import View
from agentq.core.summaries import summary_request, transcript
from agentq.core.usage import Tokens
from agentq.followups import Advance, Compact, FollowUp
from agentq.providers.base import CallContext
from agentq.providers.errors import CallWaits, ContextTooLong
from agentq.runtime.budgets import within_budget
from agentq.runtime.context import StepContext
from agentq.runtime.costs import cost_in_force, turn_of
from agentq.runtime.held import hold_for_breaker, hold_waiting_call
from agentq.runtime.lifecycle import Claim, Lifecycle, StepWork
from agentq.runtime.model_call import ModelCall, ModelCalls, RoundInfo

log = logging.getLogger(__name__)

# A piece refused as too long is cut this much shorter, at most this many times.
SHORTER_BY = 0.75
SHORTER_TRIES = 4
# Its text, the usage of the calls that wrote it (as stored), and their tokens and count.
Summary = tuple[str, dict, Tokens]


def compaction(conversation_id: str, to_seq: int) -> Compact:
    """The compact step through `to_seq`, as its own task (`agentq.compact`)."""
    return Compact(conversation_id, to_seq, Step.compact(conversation_id, to_seq).key)


def compact(
    lifecycle: Lifecycle, calls: ModelCalls, conversation_id: str, to_seq: int,
    *, task_id: str | None = None,
) -> list[FollowUp]:
    """Summarize the log through `to_seq` (the model call waits for it), then advance."""
    view = lifecycle.ctx.store.log.load_view(conversation_id)
    if view is None or to_seq > view.last_seq:
        return []
    if view.summary is not None and view.summary.to_seq >= to_seq:
        return [Advance(conversation_id)]  # done already; its advance may have been lost
    if (wait := calls.breaker_wait(view.settings)) is not None:  # the endpoint keeps failing
        step = Step.compact(conversation_id, to_seq)
        return hold_for_breaker(lifecycle.ctx, calls.announcer, view, step, wait)
    return lifecycle.run(CompactStep(lifecycle.ctx, calls, view, to_seq), task_id=task_id)


class CompactStep(StepWork[Summary]):
    """Summarize the view's events up to `to_seq`, then ask for the next step again."""

    def __init__(self, ctx: StepContext, calls: ModelCalls, view: View, to_seq: int) -> None:
        super().__init__(ctx, view.conversation_id, view.tenant,
                         Step.compact(view.conversation_id, to_seq))
        self.calls = calls
        self.view = view
        self.to_seq = to_seq

    def turn(self) -> tuple[str | None, str | None]:
        return self.view.fsm.turn_id, self.view.fsm.trace

    def run(self, claim: Claim, lost: threading.Event) -> Summary:
        view = self.view
        ctx = CallContext(
            conversation_id=view.conversation_id, step_key=self.step.key, round_id=None,
            attempt=claim.retries + 1, rounds_committed=view.fsm.rounds, settings=view.settings,
            purpose="summary",
        )
        info = RoundInfo(view.conversation_id, view.fsm.turn_id, None, self.step.key)
        within_budget(self.ctx, self.view)
        call = self.calls.start(view.settings, info, deltas=False)
        return self._summarize(call, ctx, info, lost)

    def _summarize(self, call: ModelCall, ctx: CallContext, info: RoundInfo,
                   lost: threading.Event) -> Summary:
        """The summary through `to_seq`, written piece by piece onto the previous one."""
        view = self.view
        text = transcript(view, self.to_seq)
        summary = view.summary.content.get("text", "") if view.summary else ""
        budget = view.settings.compaction.max_context_tokens
        usage: dict = {}
        tokens = Tokens()
        start, tries = 0, 0
        while True:
            request, end = summary_request(view, summary, text, start, budget=budget)
            try:
                response = call.run(request, ctx, info, lost,
                                    timeout_s=view.settings.limits.llm_timeout_s)
            except ContextTooLong:  # the provider counts otherwise: smaller pieces
                if tries == SHORTER_TRIES:
                    raise
                budget, tries = int(request_tokens(request) * SHORTER_BY), tries + 1
                continue
            summary, start = response.text, end
            usage = _added(usage, response.usage)
            tokens = tokens + Tokens.of_call(response.usage)
            if start >= len(text):
                return summary, usage, tokens

    def hold(self, claim: Claim, opened: CallWaits) -> list[FollowUp]:
        return hold_waiting_call(self.ctx, self.calls.announcer, self.view, self.step, opened,
                                 worker=claim.worker)

    def commit(self, claim: Claim, result: Summary) -> list[FollowUp]:
        """Save the summary; a step no longer ours writes nothing, a later advance sorts it out."""
        previous = self.view.summary
        now = self.ctx.clock()
        with self.ctx.store.writes.locked(self.conversation_id) as tx:
            if tx.finish_step(self.step.key, worker=claim.worker, now=now):
                tx.save_summary(
                    from_seq=previous.to_seq + 1 if previous else 1,
                    to_seq=self.to_seq,
                    content={"text": result[0], "usage": result[1]},
                    version=previous.version + 1 if previous else 1,
                    now=now,
                )
                tx.add_usage(self.view.settings.model, result[2], now=now,
                             cost_nanos=cost_in_force(self.ctx, self.view, result[2]) or 0,
                             turn=turn_of(self.view, now))
                log.info("step committed: summary through seq %d", self.to_seq,
                         extra={"status": "succeeded"})
        return [Advance(self.conversation_id)]


def _added(total: dict, usage: dict) -> dict:
    """Token counts of several calls, summed."""
    out = dict(total)
    for name, value in usage.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = out.get(name, 0) + value
    return out
