"""Model providers: the `Provider` seam (base), its kinds and adapters, how a call reaches its
endpoint (access), errors and the retry policy.

Adapters, and the SDKs they import, load only when a profile's kind is first used
(`kinds.py`): a worker starts without paying for SDKs it may never call.
"""
from __future__ import annotations

from agentq.providers.base import CallContext, Delta, Endpoint, ModelResponse, Provider

__all__ = ["CallContext", "Delta", "Endpoint", "ModelResponse", "Provider"]
