"""What every step kind is given instead of the whole Runtime: the store, the clock, the config,
where to announce new events, the tenant rules and how to render a view, with the two writes
they share.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from agentq.config import Config
from agentq.core import drafts
from agentq.core.budget import Renderer
from agentq.core.decide import Step
from agentq.core.events import FsmState
from agentq.core.fsm import round_closed
from agentq.core.render import render
from agentq.followups import Advance, FollowUp, RunTool
from agentq.runtime.notices import Notices
from agentq.runtime.seams import NoPolicy, TenantRules
from agentq.store import ConversationInfo, Store


@dataclass(frozen=True)
class StepContext:
    """The worker's wiring that a step may use; nothing in it is a step's own state."""

    store: Store
    clock: Callable[[], datetime]
    config: Config
    notices: Notices  # tells live streams of the events a step appended
    # What the operator allows a tenant's steps: running steps, budgets, ceilings, queues.
    rules: TenantRules = field(default_factory=NoPolicy)
    # How a model step renders its view: `render`, or a worker's transcripts that give the same.
    render: Renderer = render

    def record_error(
        self, conversation_id: str, step: Step, status: str, code: str, message: str,
        details: dict | None = None,
    ) -> list[FollowUp]:
        """Append the `error` event of a step that failed its turn (a failed turn asks for nothing)."""
        now = self.clock()
        with self.store.writes.locked(conversation_id) as tx:
            events, _ = tx.append_and_fold([drafts.error(
                code, message, status=status, step_key=step.key,
                turn_id=tx.conversation.fsm.turn_id, round_id=step.round_id, created_at=now,
                details=details,
            )], now=now)
        self.notices.notify(conversation_id, events)
        return to_parent(tx.conversation)


def to_parent(info: ConversationInfo) -> list[FollowUp]:
    """The task that hands a child's ended turn to its parent's call (none for a root).

    The append that ended the turn scheduled that step (agentq.store.eventlog); this only
    sends it now instead of at the sweeper's next pass.
    """
    parent = info.parent
    if parent is None:
        return []
    step = Step.child(parent.conversation_id, parent.tool_call_id)
    return [RunTool(parent.conversation_id, parent.tool_call_id, step.key)]


def after_result(conversation_id: str, fsm: FsmState) -> list[FollowUp]:
    """Whoever commits the last open result of a round asks for the next model call."""
    return [Advance(conversation_id)] if round_closed(fsm) else []
