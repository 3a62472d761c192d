"""The import path `agentq.pubsub` of releases before the folders per role: kept, with a
DeprecationWarning, so embedding code and benchmarks written against it keep running for a
release. New code imports `agentq.live.pubsub`."""
from __future__ import annotations

import warnings

from agentq.live.pubsub import PubSub

warnings.warn("agentq.pubsub moved to agentq.live.pubsub", DeprecationWarning, stacklevel=2)

__all__ = ["PubSub"]
