"""The provider seam: what a model call yields, what it is told, and which one to use.

Adapters (scripted, and later openai / anthropic) implement `Provider`; the runtime only
ever sees `Delta`s, one final `ModelResponse`, or a `ProviderError`.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentq.core.messages import CallRef, Request
from agentq.core.settings import Settings
from agentq.providers.errors import ProviderUnavailable


@dataclass(frozen=True)
class Delta:
    """A piece of streamed answer text; `index` counts the pieces of one attempt from 0."""

    index: int
    text: str


@dataclass(frozen=True)
class ModelResponse:
    """The whole answer of one round, yielded once, after the last delta."""

    text: str
    tool_calls: tuple[CallRef, ...] = ()
    usage: dict[str, Any] = field(default_factory=dict)
    finish_reason: str = "stop"


@dataclass(frozen=True)
class CallContext:
    """What a provider may know about the step it serves.

    `attempt` is 1-based; `rounds_committed` is how many rounds the conversation has
    already committed (the scripted provider picks its answer with it).
    """

    conversation_id: str
    step_key: str
    round_id: str
    attempt: int
    rounds_committed: int
    settings: Settings


class Provider(Protocol):
    """A model behind one API."""

    def stream(
        self, request: Request, ctx: CallContext, cancel: threading.Event
    ) -> Iterator[Delta | ModelResponse]:
        """Yield deltas as text arrives, then exactly one ModelResponse.

        Careful: once `cancel` is set the iterator stops at once (closing its HTTP stream)
        and ends WITHOUT a ModelResponse. Failures raise; `retry.classify` translates them.
        """
        ...


def provider_for(settings: Settings) -> Provider:
    """The provider a conversation's settings name."""
    if settings.provider == "scripted":
        # Imported here because every adapter imports this module.
        from agentq.providers.scripted import ScriptedProvider

        return ScriptedProvider()
    # A later issue adds the openai and anthropic adapters; until then this is an explicit
    # permanent error, never a stand-in that pretends to answer.
    raise ProviderUnavailable(f"provider {settings.provider!r} is not available in this build yet")
