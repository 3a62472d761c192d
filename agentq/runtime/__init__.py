"""What a worker does: one step lifecycle, one module per step kind, and the timers they keep."""
from agentq.runtime.runtime import Runtime

__all__ = ["Runtime"]
