"""The guardrails of a model step: input ones before or beside its model call, output ones after it.

They run in the model step, under its claim: each run has its own step key
(agentq.core.guardrails.guardrail_key), and its verdict is written by the step's one commit,
so a step run again after its worker died runs them once more and records each verdict
once. A trip replaces what the step would have written: no answer reaches the log, only
the verdicts and the `guardrail_tripped` error that fails the turn; the call's tokens are
counted all the same.

A `parallel` input guardrail runs on a thread of its own while the model streams; if it
trips it hangs the model call up (the stream is closed, as an interrupt closes it), and
the step commits the trip instead of the answer.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime

from agentq.core.decide import current_turn
from agentq.core.events import EventDraft, View
from agentq.core.fsm import fold
from agentq.core.guardrails import Phase, Verdict, first_round, guardrail_key, input_text, verdict_drafts
from agentq.core.scope import SYSTEM_SCOPE, Scope
from agentq.core.settings import GuardrailRef
from agentq.core.usage import Tokens
from agentq.followups import Advance, FollowUp
from agentq.providers.base import ModelResponse
from agentq.runtime.context import StepContext, to_parent
from agentq.runtime.costs import cost_in_force, counted_call
from agentq.store.whole_commit import SeeingInbox
from agentq.telemetry import tracing
from agentq.telemetry.attributes import tool_attributes
from agentq.tools import Registry
from agentq.tools.guardrails import GuardrailContext

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tripped:
    """A guardrail tripped: the step commits the verdicts, not the answer (`response`, whose
    tokens are counted, if the model was called)."""

    response: ModelResponse | None = None


@dataclass(frozen=True)
class Checked:
    """One guardrail's run: its step key and its verdict."""

    step_key: str
    verdict: Verdict


class Guard:
    """The guardrails one model step runs, and the verdicts they gave, in the order they ran."""

    def __init__(self, registry: Registry, view: View, step_key: str, after_seq: int) -> None:
        self.registry = registry
        self.view = view
        self.step_key = step_key  # the model step's
        self.after_seq = after_seq
        self.checked: list[Checked] = []
        self._lock = threading.Lock()
        self._text = ""  # the user's message, read only if there are input guardrails
        self._first = False
        if view.settings.input_guardrails:
            turn = current_turn(view.events)
            self._first = first_round(turn)
            self._text = input_text(turn)

    def _inputs(self, parallel: bool) -> list[GuardrailRef]:
        if not self._first:
            return []
        return [r for r in self.view.settings.input_guardrails or () if r.parallel == parallel]

    def before(self) -> bool:
        """Run the input guardrails that go before the model call; True if one tripped."""
        return any(self._run("input", ref.name, self._text).tripped
                   for ref in self._inputs(parallel=False))

    def beside(self, cancel: threading.Event) -> threading.Thread | None:
        """Start the parallel input guardrails on a thread; a trip sets `cancel` (the model
        call's), which hangs the call up."""
        refs = self._inputs(parallel=True)
        if not refs:
            return None

        def run() -> None:
            for ref in refs:
                if self._run("input", ref.name, self._text).tripped:
                    cancel.set()
                    return

        thread = threading.Thread(target=run, name="agentq-guardrails", daemon=True)
        thread.start()
        return thread

    def after(self, response: ModelResponse) -> bool:
        """Run the output guardrails on a final answer (one with no tool call); True if one
        tripped."""
        if response.tool_calls:
            return False
        return any(self._run("output", ref.name, response.text).tripped
                   for ref in self.view.settings.output_guardrails or ())

    @property
    def tripped(self) -> bool:
        with self._lock:
            return any(c.verdict.tripped for c in self.checked)

    def _run(self, phase: Phase, name: str, text: str) -> Verdict:
        view = self.view
        key = guardrail_key(view.conversation_id, phase, name, self.after_seq)
        scope = Scope.from_json(view.fsm.scope) if view.fsm.scope else SYSTEM_SCOPE
        ctx = GuardrailContext(view.conversation_id, phase, scope, view.agent, key)
        with tracing().tool(tool_attributes(name=f"guardrail:{name}", call_id=key,
                                            conversation_id=view.conversation_id)) as span:
            verdict = self.registry.guardrails.run(name, text, ctx)
            if verdict.tripped:
                span.failed("guardrail_tripped")
        log.info("guardrail %s (%s) %s", name, phase, "tripped" if verdict.tripped else "passed",
                 extra={"guardrail": name})
        with self._lock:
            self.checked.append(Checked(key, verdict))
        return verdict

    def drafts(self, turn_id: str | None, now: datetime) -> list[EventDraft]:
        """The verdicts' events, in the order the guardrails ran; a trip's error after its own."""
        with self._lock:
            checked = list(self.checked)
        out: list[EventDraft] = []
        for item in checked:
            out.extend(verdict_drafts(item.verdict, step_key=item.step_key, turn_id=turn_id,
                                      created_at=now))
            if item.verdict.tripped:
                break  # the turn ended there: what ran after it says nothing more
        return out


def commit_trip(ctx: StepContext, guard: Guard, tripped: Tripped, *, worker: str) -> list[FollowUp]:
    """The model step's commit when a guardrail tripped: the verdicts and the error, no
    answer; the model call's tokens, if it was made, counted."""
    view = guard.view
    cid, now = view.conversation_id, ctx.clock()
    usage = None
    if tripped.response is not None:
        tokens = Tokens.of_call(tripped.response.usage)
        usage = counted_call(view, tokens, cost_in_force(ctx, view, tokens), now)
    done = ctx.store.writes.commit_step(
        cid, guard.drafts(view.fsm.turn_id, now), next_seq=guard.after_seq + 1,
        state_after=lambda appended: fold(appended, view.fsm), step_key=guard.step_key,
        worker=worker, finish=SeeingInbox(usage), now=now)
    ctx.notices.notify(cid, done.events)
    log.info("step committed: a guardrail tripped", extra={"status": "succeeded"})
    return ([Advance(cid)] if done.waiting else []) + to_parent(done.conversation)
