"""The two decisions that write to the log without a claimed step: a new turn, a failed one.

Both write under the conversation's lock only if the log is still as the decision saw
it; a lost race writes nothing (the next advance decides again).
"""
from __future__ import annotations

import uuid

from agentq.core import drafts
from agentq.core.events import InboxItem, View
from agentq.errors import Stale
from agentq.followups import Advance, FollowUp
from agentq.runtime.context import StepContext, to_parent


def start_turn(ctx: StepContext, view: View, item: InboxItem) -> list[FollowUp]:
    """Drain one inbox message into a new turn (inv. 2: only at a turn boundary)."""
    now = ctx.clock()
    turn_id = item.turn_id or str(uuid.uuid4())  # named when it arrived (not before this field)
    try:
        with ctx.store.writes.locked(view.conversation_id) as tx:
            if tx.conversation.fsm.state in ("running", "awaiting_input"):
                raise Stale("a turn is still running")
            if not tx.take_inbox(item.id, turn_id=turn_id, now=now):
                raise Stale("the inbox message was already taken")
            draft = drafts.user_msg(
                item.content.get("text", ""),
                turn_id=turn_id,
                message_id=item.id,
                scope=item.scope,
                created_at=item.created_at,
                parts=item.content.get("parts") or (),
                traceparent=item.content.get("traceparent"),
                unattended=item.content.get("unattended"),
            )
            events, _ = tx.append_and_fold([draft], now=now)
    except Stale:
        return []
    ctx.notices.notify(view.conversation_id, events)
    return [Advance(view.conversation_id)]


def fail_turn(ctx: StepContext, view: View, code: str, message: str) -> list[FollowUp]:
    """Record why the turn cannot go on (`decide` said so); the conversation is failed."""
    now = ctx.clock()
    try:
        with ctx.store.writes.locked(view.conversation_id) as tx:
            if tx.conversation.next_seq - 1 != view.last_seq:
                raise Stale("the log moved")
            draft = drafts.error(
                code, message, status="failed_permanent", step_key=None,
                turn_id=tx.conversation.fsm.turn_id, round_id=None, created_at=now,
            )
            events, _ = tx.append_and_fold([draft], now=now)
    except Stale:
        return []
    ctx.notices.notify(view.conversation_id, events)
    return to_parent(tx.conversation)
