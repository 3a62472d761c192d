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
from agentq.runtime.costs import cost_in_force, counted_call, counted_guardrail_call
from agentq.runtime.guardrail_agents import AgentCall, GuardrailAgents
from agentq.runtime.model_call import Cancelled
from agentq.store.step_commit import Counted
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
    """One guardrail's run: its step key, its verdict and, for an agent, what its call spent."""

    step_key: str
    verdict: Verdict
    call: AgentCall | None = None


class Guard:
    """The guardrails one model step runs, and the verdicts they gave, in the order they ran.

    `agents` runs those that are agents (agentq.runtime.guardrail_agents), set by the step
    once it is claimed (its calls are of the claim's attempt); `cancel` is the step's: a lost
    lease or an interrupt stops a guardrail agent's call as it stops the step's own."""

    def __init__(self, registry: Registry, view: View, step_key: str, after_seq: int,
                 agents: GuardrailAgents | None = None) -> None:
        self.registry = registry
        self.view = view
        self.step_key = step_key  # the model step's
        self.after_seq = after_seq
        self.agents = agents
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

    def before(self, cancel: threading.Event) -> bool:
        """Run the input guardrails that go before the model call; True if one tripped."""
        return any(self._run("input", ref, self._text, cancel).tripped
                   for ref in self._inputs(parallel=False))

    def beside(self, cancel: threading.Event) -> threading.Thread | None:
        """Start the parallel input guardrails on a thread; a trip sets `cancel` (the model
        call's), which hangs the call up. A guardrail that fails there trips (no verdict is
        no pass); one hung up with the call says nothing."""
        refs = self._inputs(parallel=True)
        if not refs:
            return None

        def run() -> None:
            for ref in refs:
                try:
                    tripped = self._run("input", ref, self._text, cancel).tripped
                except Cancelled:
                    return  # the step was interrupted or lost: it commits no verdict
                except Exception as exc:  # noqa: BLE001 - on this thread, a failure must trip
                    log.warning("guardrail %s failed beside the model call: %s", ref.label, exc)
                    key = guardrail_key(self.view.conversation_id, "input", ref.label,
                                        self.after_seq)
                    self._record(Checked(key, Verdict(ref.label, "input", True, {
                        "error": f"{type(exc).__name__}: {exc}"})))
                    tripped = True
                if tripped:
                    cancel.set()
                    return

        thread = threading.Thread(target=run, name="agentq-guardrails", daemon=True)
        thread.start()
        return thread

    def after(self, response: ModelResponse, cancel: threading.Event) -> bool:
        """Run the output guardrails on a final answer (one with no tool call); True if one
        tripped."""
        if response.tool_calls:
            return False
        return any(self._run("output", ref, response.text, cancel).tripped
                   for ref in self.view.settings.output_guardrails or ())

    @property
    def tripped(self) -> bool:
        with self._lock:
            return any(c.verdict.tripped for c in self.checked)

    def _run(self, phase: Phase, ref: GuardrailRef, text: str, cancel: threading.Event
             ) -> Verdict:
        view, name = self.view, ref.label
        key = guardrail_key(view.conversation_id, phase, name, self.after_seq)
        call = None
        with tracing().tool(tool_attributes(name=f"guardrail:{name}", call_id=key,
                                            conversation_id=view.conversation_id)) as span:
            if ref.agent is not None and self.agents is not None:
                verdict, call = self.agents.run(ref.agent, phase, text, key, cancel)
            elif ref.agent is not None:
                verdict = Verdict(name, phase, True, {"error": "no model calls in this step"})
            else:
                scope = Scope.from_json(view.fsm.scope) if view.fsm.scope else SYSTEM_SCOPE
                ctx = GuardrailContext(view.conversation_id, phase, scope, view.agent, key)
                verdict = self.registry.guardrails.run(name, text, ctx)
            if verdict.tripped:
                span.failed("guardrail_tripped")
        log.info("guardrail %s (%s) %s", name, phase, "tripped" if verdict.tripped else "passed",
                 extra={"guardrail": name})
        self._record(Checked(key, verdict, call))
        return verdict

    def _record(self, checked: Checked) -> None:
        with self._lock:
            self.checked.append(checked)

    def drafts(self, turn_id: str | None, now: datetime) -> list[EventDraft]:
        """The verdicts' events, in the order the guardrails ran; a trip's error after its own."""
        with self._lock:
            checked = list(self.checked)
        out: list[EventDraft] = []
        for item in checked:
            out.extend(verdict_drafts(item.verdict, step_key=item.step_key, turn_id=turn_id,
                                      created_at=now,
                                      call=None if item.call is None else item.call.record()))
            if item.verdict.tripped:
                break  # the turn ended there: what ran after it says nothing more
        return out

    def spent(self, now: datetime) -> tuple[Counted, ...]:
        """What the guardrail agents' calls spent, each counted under its agent by the step's
        commit (agentq.runtime.costs.counted_guardrail_call)."""
        with self._lock:
            calls = [c.call for c in self.checked if c.call is not None]
        return tuple(counted_guardrail_call(self.view, call.agent, call.settings, call.tokens,
                                            call.cost_nanos, now) for call in calls)


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
        worker=worker, finish=SeeingInbox(usage, also=guard.spent(now)), now=now)
    ctx.notices.notify_now(cid, done.events)  # the turn is over: streams first, then the inbox
    log.info("step committed: a guardrail tripped", extra={"status": "succeeded"})
    return ([Advance(cid)] if done.message_waits() else []) + to_parent(done.conversation)
