"""The Celery side, the only package that imports celery and kombu: the app, its task shims and
signals, task events, the broker transport, the queues and embedded mode.

`celery -A agentq.worker:app` finds the app here: the attribute is built on first access (by
agentq.worker.main, the composition root), so importing agentq.worker.tasks or
agentq.worker.factory builds no app, reads no environment and loads no policy.
"""
from __future__ import annotations

import warnings
from typing import Any

# Names this package exported before the Celery side was split into modules, kept for a
# release (with a DeprecationWarning) so embedding code written against them keeps running.
_MOVED = {"create_celery": "agentq.worker.factory", "enqueue": "agentq.worker.tasks"}


def __getattr__(name: str) -> Any:
    if name == "app":
        from agentq.worker.main import app

        return app
    if name in _MOVED:
        import importlib

        warnings.warn(f"agentq.worker.{name} moved to {_MOVED[name]}.{name}",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
