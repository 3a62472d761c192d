"""The Celery side, the only package that imports celery and kombu: the app, its task shims and
signals, task events, the broker transport, the queues and embedded mode.

`celery -A agentq.worker:app` finds the app here: the attribute is built on first access (by
agentq.worker.main, the composition root), so importing agentq.worker.tasks or
agentq.worker.factory builds no app, reads no environment and loads no policy.
"""
from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "app":
        from agentq.worker.main import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
