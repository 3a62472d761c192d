"""The neutral request: what any provider is asked, before its own wire shape.

`render` builds it from a view; provider adapters translate it; `validate` checks it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from agentq.core.reasoning import Reasoning

Role = Literal["user", "assistant", "tool"]
T = TypeVar("T")


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model sees it: name, description, JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class CallRef:
    """A tool call inside an assistant message."""

    id: str
    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Message:
    """One neutral message. `tool` messages answer exactly one call by `tool_call_id`, with
    the result's `status` (ok, error, rejected, expired, cancelled); an assistant message
    carries the reasoning items its response returned, for its kind."""

    role: Role
    text: str = ""
    tool_calls: tuple[CallRef, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False
    status: str | None = None
    reasoning: tuple[Reasoning, ...] = ()
    # A user message's content parts (core/parts.py): text and images, in order; on a
    # `tool` message, the images of a tool server's result.
    parts: tuple[dict[str, Any], ...] = ()

    def memo(self, make: Callable[[Message], T]) -> T:
        """`make(self)`, made once per message: a message never changes, so neither does
        what is made of it (its token estimate, its wire shape for each API).

        Why: a worker keeps the messages of a conversation's closed turns (`core.transcript`),
        so each is counted and shaped once, not on every model call. Careful: what `make`
        returns is shared by every caller; a caller that changes it must change a copy.
        The memo sits beside the fields, so equality, `repr` and `replace` ignore it.
        """
        try:
            return self.__dict__["_made"][make]
        except KeyError:
            return self.__dict__.setdefault("_made", {}).setdefault(make, make(self))


@dataclass(frozen=True)
class Request:
    """A whole model request; `repairs` lists what `repair` had to close, for the record."""

    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    model: str = ""
    repairs: tuple[str, ...] = field(default=())
