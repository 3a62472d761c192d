"""One streamed answer put together: text pieces, tool calls from fragments, reasoning items,
usage, finish.

Both SDK adapters feed an `Answer` as events arrive and ask it for the `ModelResponse` at
the end. Tool-call arguments arrive as JSON text in pieces; text that does not parse is
kept whole as `{"__raw__": text}`, so the runtime answers the model with an argument
error it can read, instead of the step crashing.
"""
from __future__ import annotations

import json
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from agentq.core.keys import scripted_call_id
from agentq.core.reasoning import Reasoning
from agentq.core.request import CallRef
from agentq.providers.base import ModelResponse
from agentq.providers.errors import ProviderError

RAW_ARGS = "__raw__"


def parse_args(text: str, initial: dict[str, Any] | None = None) -> dict[str, Any]:
    """The arguments object of `text`; `initial` when nothing streamed; raw text if not an object."""
    if not text.strip():
        return dict(initial or {})
    try:
        value = json.loads(text)
    except ValueError:
        return {RAW_ARGS: text}
    return value if isinstance(value, dict) else {RAW_ARGS: text}


@dataclass
class _PartialCall:
    id: str | None = None
    name: str = ""
    pieces: list[str] = field(default_factory=list)
    initial: dict[str, Any] | None = None


class Answer:
    """The parts of one response as they stream in; `response` assembles them once it finished."""

    def __init__(self, step_key: str, provider: str = "") -> None:
        self._step_key = step_key
        self._provider = provider
        self._texts: list[str] = []
        self._calls: dict[Hashable, _PartialCall] = {}
        self._reasoning: dict[int, dict[str, Any]] = {}  # position -> the item as it grows
        self.usage: dict[str, Any] = {}
        self.finish_reason: str | None = None
        self.model: str | None = None  # the model that answered, as the API names it

    def add_text(self, text: str) -> str:
        self._texts.append(text)
        return text

    def has_call(self, slot: Hashable) -> bool:
        return slot in self._calls

    def has_calls(self) -> bool:
        return bool(self._calls)

    def call_id(self, slot: Hashable) -> str | None:
        return self._calls[slot].id if slot in self._calls else None

    def add_call(
        self,
        slot: Hashable,
        *,
        call_id: str | None = None,
        name: str | None = None,
        args: str | None = None,
        initial: dict[str, Any] | None = None,
    ) -> None:
        """Start or continue the call in `slot` (fragments fill what is still missing)."""
        call = self._calls.setdefault(slot, _PartialCall())
        call.id = call.id or call_id or None
        call.name = call.name or name or ""
        if args:
            call.pieces.append(args)
        if initial:
            call.initial = dict(initial)

    def start_reasoning(self, position: int, item: dict[str, Any]) -> None:
        """A reasoning item begins at `position` among the response's blocks (its fields may
        grow with `extend_reasoning`)."""
        self._reasoning[position] = dict(item)

    def extend_reasoning(self, position: int, name: str, piece: str) -> None:
        """Appends a streamed piece to one text field of the reasoning item at `position`."""
        item = self._reasoning.get(position)
        if item is not None:
            item[name] = (item.get(name) or "") + piece

    def response(self, *, sent: dict[str, Any], latency_ms: int) -> ModelResponse:
        """The whole answer; raises a transient error if the stream stopped before its end."""
        if self.finish_reason is None:
            raise ProviderError(
                "the response stream ended before the answer was complete",
                transient=True,
                code="incomplete_stream",
            )
        calls = tuple(
            CallRef(
                # A server that sends no call id gets a deterministic one, as the scripted
                # provider makes (the same on every attempt of this step).
                id=call.id or scripted_call_id(self._step_key, number),
                name=call.name,
                args=parse_args("".join(call.pieces), call.initial),
            )
            for number, call in enumerate(self._calls.values())
        )
        return ModelResponse(
            text="".join(self._texts),
            tool_calls=calls,
            usage=dict(self.usage),
            finish_reason=self.finish_reason,
            reasoning=tuple(Reasoning(self._provider, item, position)
                            for position, item in sorted(self._reasoning.items())),
            sent=sent,
            latency_ms=latency_ms,
            model=self.model,
        )
