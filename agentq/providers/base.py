"""The provider seam: what a model call yields, what it is told, and where it goes (`factory` picks one).

Adapters (scripted, openai, anthropic) implement `Provider`; the runtime only
ever sees `Delta`s, one final `ModelResponse`, or a `ProviderError`. Which adapter,
endpoint and key serve a conversation is the operator's profile (`providers.access`).
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentq.core.reasoning import Reasoning
from agentq.core.request import CallRef, Request
from agentq.core.settings import Settings
from agentq.providers.errors import ProviderError


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
    # Thinking / reasoning items, verbatim, that the same API must get back next round.
    reasoning: tuple[Reasoning, ...] = ()
    # What went over the wire (the request body, exactly) and how long the answer took,
    # for the model_calls audit; None where nothing was sent (the scripted provider).
    sent: dict[str, Any] | None = None
    latency_ms: int | None = None
    model: str | None = None  # the model that answered, as the API named it


@dataclass(frozen=True)
class Endpoint:
    """Where one model call goes and the key it carries, from the operator's profile.

    Resolved per call by `access.resolve_endpoint`, the one place that picks a URL and a
    key; adapters take both from here and nowhere else. The key never shows in a repr.
    """

    profile: str
    kind: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)

    def require(self) -> tuple[str, str]:
        """(base_url, api_key) of a networked endpoint."""
        if not self.base_url or not self.api_key:
            raise ProviderError(f"profile {self.profile!r} has no endpoint", code="no_endpoint")
        return self.base_url, self.api_key


@dataclass(frozen=True)
class CallContext:
    """What a provider may know about the step it serves.

    `attempt` is 1-based; `rounds_committed` is how many rounds the conversation has
    already committed (the scripted provider picks its answer with it); `purpose` says
    whether the call answers the user or writes a summary.
    """

    conversation_id: str
    step_key: str
    round_id: str | None
    attempt: int
    rounds_committed: int
    settings: Settings
    purpose: str = "answer"  # or "summary": a compact step asks for the running summary
    endpoint: Endpoint | None = None  # set by access.ProfiledProvider for the adapter


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

