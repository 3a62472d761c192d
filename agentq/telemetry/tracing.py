"""The tracing of this process: OpenTelemetry when the operator's OTEL_* environment asks for
it, else a no-op that imports nothing and costs a method call.

Careful: the SDK's providers are process-wide by its own design, so the one `Tracing` of a
process is built the first time it is asked for, in that process: after gunicorn or
Celery's prefork pool forked it, never inherited from a parent (`os.register_at_fork`
forgets the parent's). Every span helper of agentq goes through `tracing()`.
"""
from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping

from agentq.telemetry.spans import Tracing

log = logging.getLogger(__name__)

_FALSE = ("false", "0", "no", "")

OFF = Tracing()
_current: list[Tracing] = []
_lock = threading.Lock()


def tracing() -> Tracing:
    """This process's tracing, built at its first use from the environment."""
    if _current:
        return _current[0]
    with _lock:
        if not _current:
            _current.append(_build(os.environ))
    return _current[0]


def wanted(env: Mapping[str, str]) -> tuple[bool, bool]:
    """(traces, metrics): what the OTEL_* environment asks this process to export.

    Traces when OTEL_TRACES_EXPORTER names an exporter or an OTLP endpoint is set; metrics
    likewise with OTEL_METRICS_EXPORTER; OTEL_SDK_DISABLED=true turns both off.
    """
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False, False
    endpoint = any(env.get(name, "").strip() for name in (
        "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
    metrics_endpoint = any(env.get(name, "").strip() for name in (
        "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"))
    return (_asked(env.get("OTEL_TRACES_EXPORTER"), endpoint),
            _asked(env.get("OTEL_METRICS_EXPORTER"), metrics_endpoint))


def _asked(exporter: str | None, endpoint: bool) -> bool:
    if exporter is None or not exporter.strip():
        return endpoint
    return exporter.strip().lower() not in ("none", *_FALSE)


def _build(env: Mapping[str, str]) -> Tracing:
    traces, metrics = wanted(env)
    if not traces:
        return OFF
    try:
        from agentq.telemetry.otel import OtelTracing
    except ImportError as exc:
        log.warning("OTEL_* asks for traces but the OpenTelemetry SDK is not installed "
                    "(pip install 'agentq[otel]'): tracing stays off (%s)", exc)
        return OFF
    return OtelTracing.from_env(env, metrics=metrics)


def _forget() -> None:
    """In a forked child: the parent's tracing (its exporter thread) is not ours."""
    _current.clear()


os.register_at_fork(after_in_child=_forget)
