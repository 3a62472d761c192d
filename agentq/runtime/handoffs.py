"""A model response that calls a transfer tool: its target found for the tenant, and the
answers its calls get in the model step's commit, with the `handoff` event among them.

The handoff is written in the same commit as the model's answer and the transfer call's
result (inv. 3): a step killed before that commit runs again and asks the model again; one
killed after it finds its step done. Either way the conversation is handed over once, and
its next model step, of the same turn, runs with the target's settings (the fold of the
log says so: agentq.core.handoffs).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from agentq.core import drafts
from agentq.core.events import EventDraft, ToolCallRecord, View
from agentq.core.handoff_targets import HandoffTarget, find_target
from agentq.core.handoffs import (
    BY_MODEL,
    Handoff,
    holder_name,
    not_run,
    second_transfer,
    transfer_output,
)
from agentq.core.request import CallRef
from agentq.runtime.children import find_agent
from agentq.runtime.context import StepContext
from agentq.telemetry import tracing
from agentq.telemetry.attributes import handoff_attributes


@dataclass(frozen=True)
class Transfer:
    """The first transfer call of a response, and its handoff (None if it is refused: why)."""

    call_id: str
    handoff: Handoff | None
    refusal: str | None = None


def reason_of(args: dict[str, Any]) -> str:
    """The model's reason argument, as much of it as a string gives."""
    reason = args.get("reason") if isinstance(args, dict) else None
    return reason[:2000] if isinstance(reason, str) else ""


def target_handoff(ctx: StepContext, view: View, target: HandoffTarget, *, why: str,
                   tool_call_id: str | None) -> Handoff | str:
    """The handoff to `target`, its settings admitted for the conversation's tenant, or why
    there is none. The agent the conversation started from runs with its own settings."""
    source = holder_name(view.fsm, view.agent.name if view.agent else None)
    own = Handoff(source=source, target=target.name, version=None, why=why, by=BY_MODEL,
                  settings=None, input_filter=target.input_filter, tool_call_id=tool_call_id)
    if view.agent is not None and target.name == view.agent.name:
        return replace(own, version=view.agent.version)
    found = find_agent(ctx.store, ctx.rules, view.tenant, target.name)
    if isinstance(found, str):
        return f"cannot hand off: {found}"
    return replace(own, version=found.ref.version,
                   settings=found.settings.model_dump(mode="json"))


class HandoffRound:
    """What a model response's calls get once it called a transfer tool."""

    def __init__(self, transfer: Transfer | None, targets: Sequence[HandoffTarget] | None):
        self.transfer = transfer
        self.targets = targets

    @classmethod
    def of(cls, ctx: StepContext, view: View, calls: Sequence[CallRef]) -> HandoffRound:
        """The response's first transfer call, its target found (no I/O without one)."""
        targets = view.settings.handoffs
        first = next((c for c in calls if find_target(targets, c.name) is not None), None)
        if first is None:
            return cls(None, targets)
        target = find_target(targets, first.name)
        assert target is not None
        source = holder_name(view.fsm, view.agent.name if view.agent else None)
        with tracing().tool(handoff_attributes(
                name=first.name, call_id=first.id, conversation_id=view.conversation_id,
                source=source, target=target.name)) as span:
            found = target_handoff(ctx, view, target, why=reason_of(first.args),
                                   tool_call_id=first.id)
            if isinstance(found, str):
                span.failed("handoff_refused")
                return cls(Transfer(first.id, None, found), targets)
        return cls(Transfer(first.id, found), targets)

    @property
    def handoff(self) -> Handoff | None:
        return None if self.transfer is None else self.transfer.handoff

    def answers(self, call: CallRef) -> bool:
        """Whether this round answers `call`: every call once a handoff is taken, and
        each transfer call."""
        return self.handoff is not None or find_target(self.targets, call.name) is not None

    def answer(self, call: CallRef, *, conversation_id: str, turn_id: str, round_id: str,
               step_key: str, created_at: datetime
               ) -> tuple[EventDraft, EventDraft, ToolCallRecord]:
        """The call, its result and its record, committed together: it never runs as a
        tool step."""
        status, output = self._result(call)
        common: dict[str, Any] = dict(turn_id=turn_id, round_id=round_id, step_key=step_key,
                                      created_at=created_at)
        made = drafts.tool_call(call.id, call.name, call.args, executor="server",
                                expires_at=None, **common)
        result = drafts.tool_result(call.id, status, output, **common)
        record = ToolCallRecord(
            conversation_id=conversation_id, id=call.id, name=call.name, executor="server",
            status="done", args=call.args, round_id=round_id, turn_id=turn_id,
            created_at=created_at, result={"status": status, "output": output},
            resolved_at=created_at)
        return made, result, record

    def _result(self, call: CallRef) -> tuple[str, Any]:
        transfer, handoff = self.transfer, self.handoff
        assert transfer is not None
        if call.id == transfer.call_id and handoff is not None:
            return "ok", transfer_output(handoff.target)
        if call.id == transfer.call_id:
            return "error", transfer.refusal
        if handoff is None:  # the first transfer was refused: so is any other
            return "error", "only one handoff per response is taken, the first: it was refused"
        if find_target(self.targets, call.name) is not None:
            return "error", second_transfer(handoff.target)
        return "error", not_run(handoff.target)
