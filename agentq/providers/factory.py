"""`provider_for`: the adapter a conversation's settings name.

Apart from the seam (`base`), so that the adapters, which import the seam, are not
imported back by it.
"""
from __future__ import annotations

import os
from collections.abc import Mapping

from agentq.core.settings import Settings
from agentq.providers.base import Provider
from agentq.providers.errors import ProviderUnavailable


def provider_for(settings: Settings, env: Mapping[str, str] | None = None) -> Provider:
    """The provider a conversation's settings name; API keys are read from `env` at call time.

    `env` defaults to the process environment: keys live there, never in settings.
    """
    # Imported on demand: a process loads only the SDKs its conversations use.
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
