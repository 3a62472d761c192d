"""The sub-agents a parent's stream follows with `include_children`: whose text it forwards.

A child is found in the parent's log, by the `tool_call` of executor "agent" that starts it
(and, when the stream opens, among the parent's calls still pending: children running
then). The stream joins the child's channel (agentq/live/fanout.py), whose deltas then come
with the parent's notices, and leaves it once the call's `tool_result` is in the log.

The child's id is derived here from the parent's id and the call's (inv. 10), not read from
the event, and a child's row, once it exists, must belong to the stream's tenant: a stream
never carries another conversation's text. At most `limit` children are followed at once
(the operator's `max_children_per_turn`); one more is not followed (its log still has its
answer). Only direct children are followed, and only their text: a child's events,
retries and own sub-agents are not forwarded.

Careful: a child's deltas published before the stream joined its channel are not sent
(pub/sub keeps nothing), and a reconnection does not replay them; the child's log has its
text as soon as its round ends.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentq.core.events import Event, ToolCallRecord
from agentq.core.subagents import AGENT_EXECUTOR, child_conversation_id
from agentq.live.pubsub import Notice, channel

log = logging.getLogger(__name__)


@dataclass
class ChildDeltas:
    """The children a stream of `conversation_id` wants, and the channels it joined.

    `join(channel)` / `leave(channel)` change the stream's feed; `owned(child_id)` is
    False if the child's row belongs to another tenant.
    """

    conversation_id: str
    limit: int
    join: Callable[[str], None]
    leave: Callable[[str], None]
    owned: Callable[[str], bool]
    wanted: dict[str, str] = field(default_factory=dict)  # call id -> child conversation id
    joined: dict[str, str] = field(default_factory=dict)  # channel -> child conversation id
    refused: set[str] = field(default_factory=set)  # children of another tenant (never, in practice)

    def running(self, calls: list[ToolCallRecord]) -> None:
        """The parent's pending calls when the stream opens: its running children."""
        for call in calls:
            if call.executor == AGENT_EXECUTOR and call.status == "pending":
                self.wanted[call.id] = child_conversation_id(self.conversation_id, call.id)

    def saw(self, event: Event) -> None:
        """An event of the parent, as the stream passes it: a child starts or is answered."""
        call_id = event.content.get("tool_call_id")
        if not isinstance(call_id, str):
            return
        if event.type == "tool_call" and event.content.get("executor") == AGENT_EXECUTOR:
            self.wanted[call_id] = child_conversation_id(self.conversation_id, call_id)
        elif event.type == "tool_result":
            self.wanted.pop(call_id, None)

    def sync(self) -> None:
        """Join the channels of the children wanted, leave the others (after a read of the log,
        so that a child started and answered within one read costs no subscription)."""
        wanted = {channel(child): child for child in self.wanted.values()}
        for name in [n for n in self.joined if n not in wanted]:
            del self.joined[name]
            self.leave(name)
        for name, child in wanted.items():
            if name in self.joined or child in self.refused or len(self.joined) >= self.limit:
                continue
            if not self.owned(child):
                self.refused.add(child)
                continue
            try:
                self.join(name)
            except Exception as exc:  # pub/sub did not confirm: the child's text is in its log
                log.warning("could not follow the sub-agent %s: %s", child, exc)
                continue
            self.joined[name] = child

    def child_of(self, notice: Notice) -> str | None:
        """The child conversation a notice came from, or None if it is the parent's."""
        return self.joined.get(notice.channel) if notice.channel else None


def child_delta(conversation_id: str, data: dict[str, Any]) -> dict[str, Any]:
    """A child's delta as the parent's stream sends it: marked with the child's id."""
    return {**data, "conversation_id": conversation_id}
