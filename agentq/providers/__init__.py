"""Model providers: the `Provider` seam (base), its adapters, errors and the retry policy."""
from __future__ import annotations

from agentq.providers.base import CallContext, Delta, ModelResponse, Provider
from agentq.providers.factory import provider_for
from agentq.providers.scripted import ScriptedProvider

__all__ = ["CallContext", "Delta", "ModelResponse", "Provider", "ScriptedProvider", "provider_for"]
