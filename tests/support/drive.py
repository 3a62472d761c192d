"""The fast path of runtime tests: follow-ups run in order with no broker, and a recording pub/sub."""
from __future__ import annotations

from collections import deque
from typing import Iterable

from agentq.followups import Advance, Compact, Expire, FollowUp, RunTool
from agentq.live.pubsub import PubSub
from agentq.runtime import Runtime


def drain(runtime: Runtime, followups: Iterable[FollowUp], *, max_tasks: int = 500) -> list[FollowUp]:
    """Run every follow-up and what it asks for; return those not yet due (expiries, and
    advances of held steps)."""
    queue: deque[FollowUp] = deque(followups)
    later: list[FollowUp] = []
    ran = 0
    while queue:
        ran += 1
        assert ran <= max_tasks, "the runtime kept asking for more work"
        item = queue.popleft()
        match item:
            case Advance(eta=eta) if eta is not None and eta > runtime.clock():
                later.append(item)
            case Advance(conversation_id=cid):
                queue.extend(runtime.advance(cid))
            case RunTool(conversation_id=cid, tool_call_id=call_id):
                queue.extend(runtime.run_tool(cid, call_id))
            case Compact(conversation_id=cid, to_seq=to_seq):
                queue.extend(runtime.compact(cid, to_seq))
            case Expire(conversation_id=cid, tool_call_id=call_id, eta=eta):
                if eta is None or eta <= runtime.clock():
                    queue.extend(runtime.expire(cid, call_id))
                else:
                    later.append(item)
    return later


class Recorder(PubSub):
    """Embedded pub/sub that also keeps what was published."""

    def __init__(self) -> None:
        super().__init__("embedded://runtime-tests")
        self.notices: list[tuple[str, dict]] = []

    def publish(self, conversation_id, kind, data):
        self.notices.append((kind, data))
        return super().publish(conversation_id, kind, data)
