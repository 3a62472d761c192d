"""Model providers: the `Provider` seam (base), its kinds and adapters, how a call reaches its
endpoint (access), errors and the retry policy."""
from __future__ import annotations

from agentq.providers.base import CallContext, Delta, Endpoint, ModelResponse, Provider
from agentq.providers.scripted import ScriptedProvider

__all__ = ["CallContext", "Delta", "Endpoint", "ModelResponse", "Provider", "ScriptedProvider"]
