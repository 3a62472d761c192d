"""The guardrails of a server tool call, in its tool step: on its arguments before the tool runs,
on its result after.

A trip refuses the call: the tool does not run (or its result is withheld) and the call's
result is an error the model reads, naming the guardrail; the turn goes on, as after any
tool error. Each run has its own step key (the call's id, the phase, the guardrail's name)
and its verdict is a `guardrail` event of the tool step's one commit, so a step run again
after its worker died records it once.
"""
from __future__ import annotations

import threading
from datetime import datetime

from agentq.core.events import EventDraft, ToolCallRecord
from agentq.core.guardrails import Phase, Verdict, refusal, tool_guardrail_key, verdict_drafts
from agentq.core.keys import canonical_json
from agentq.core.scope import Scope
from agentq.store import ConversationInfo
from agentq.telemetry import tracing
from agentq.telemetry.attributes import tool_attributes
from agentq.tools import Registry, ToolOutcome
from agentq.tools.guardrails import GuardrailContext


class ToolGuard:
    """The guardrails one tool step runs around its call, and their verdicts."""

    def __init__(self, registry: Registry, conversation: ConversationInfo, call: ToolCallRecord,
                 scope: Scope) -> None:
        self.registry = registry
        self.conversation = conversation
        self.call = call
        self.scope = scope
        self.checked: list[tuple[str, Verdict]] = []
        self._lock = threading.Lock()

    def before(self) -> ToolOutcome | None:
        """The refusal if a guardrail trips on the call's arguments; None: the tool may run.

        Run before anything of the call is committed: a `once` call refused here never gets
        a start mark, so no takeover can take it for a run that may have taken effect.
        """
        arguments = canonical_json(self.call.args)
        for ref in self.conversation.settings.tool_input_guardrails or ():
            verdict = self._run("tool_input", ref.label, arguments)
            if verdict.tripped:
                return ToolOutcome("error", refusal(verdict))
        return None

    def after(self, outcome: ToolOutcome) -> ToolOutcome:
        """The call's outcome, or a refusal if a guardrail trips on its result."""
        if outcome.asked is not None:  # no result yet: its server asked a person
            return outcome
        shown = outcome.output if isinstance(outcome.output, str) else canonical_json(outcome.output)
        for ref in self.conversation.settings.tool_output_guardrails or ():
            verdict = self._run("tool_output", ref.label, shown)
            if verdict.tripped:
                return ToolOutcome("error", refusal(verdict))
        return outcome

    def _run(self, phase: Phase, name: str, text: str) -> Verdict:
        cid = self.conversation.id
        key = tool_guardrail_key(cid, phase, name, self.call.id)
        ctx = GuardrailContext(cid, phase, self.scope, self.conversation.agent, key, self.call.name)
        with tracing().tool(tool_attributes(name=f"guardrail:{name}", call_id=key,
                                            conversation_id=cid)) as span:
            verdict = self.registry.guardrails.run(name, text, ctx)
            if verdict.tripped:
                span.failed("guardrail_tripped")
        with self._lock:
            self.checked.append((key, verdict))
        return verdict

    def drafts(self, now: datetime) -> list[EventDraft]:
        """The verdicts' events, in the order the guardrails ran."""
        out: list[EventDraft] = []
        for key, verdict in self.checked:
            out.extend(verdict_drafts(verdict, step_key=key, turn_id=self.call.turn_id,
                                      created_at=now))
        return out
