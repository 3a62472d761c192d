"""The provider seam: what a model call yields, what it is told, and which one to use.

Adapters (scripted, openai, anthropic) implement `Provider`; the runtime only
ever sees `Delta`s, one final `ModelResponse`, or a `ProviderError`.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
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
    # What went over the wire (the request body, exactly) and how long the answer took,
    # for the model_calls audit; None where nothing was sent (the scripted provider).
    sent: dict[str, Any] | None = None
    latency_ms: int | None = None


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


def endpoint_for(settings: Settings, env: Mapping[str, str] | None = None) -> str | None:
    """The endpoint (base URL) a conversation's model calls go to, which its circuit breaker
    is kept by; None for the scripted provider, which calls nothing."""
    from agentq.providers.connection import base_url

    env = os.environ if env is None else env
    if settings.provider == "openai":
        from agentq.providers import openai as adapter
    elif settings.provider == "anthropic":
        from agentq.providers import anthropic as adapter  # type: ignore[no-redef]
    else:
        return None
    return base_url(settings, env, adapter.URL_VARIABLE, adapter.DEFAULT_BASE_URL).rstrip("/")


def provider_for(settings: Settings, env: Mapping[str, str] | None = None) -> Provider:
    """The provider a conversation's settings name; API keys are read from `env` at call time.

    `env` defaults to the process environment: keys live there, never in settings.
    """
    # Imported here because every adapter imports this module.
    if settings.provider == "scripted":
        from agentq.providers.scripted import ScriptedProvider

        return ScriptedProvider()
    if settings.provider == "openai":
        from agentq.providers.openai import OpenAIProvider

        return OpenAIProvider(os.environ if env is None else env)
    if settings.provider == "anthropic":
        from agentq.providers.anthropic import AnthropicProvider

        return AnthropicProvider(os.environ if env is None else env)
    raise ProviderUnavailable(f"provider {settings.provider!r} is not available in this build")
