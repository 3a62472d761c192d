"""What a running tool may know of the call it runs for."""
from __future__ import annotations

from dataclasses import dataclass

from agentq.core.scope import Scope


@dataclass(frozen=True)
class ToolContext:
    """What a running tool may know. Use `tool_call_id` as the idempotency key of side effects."""

    tool_call_id: str
    conversation_id: str
    scope: Scope
